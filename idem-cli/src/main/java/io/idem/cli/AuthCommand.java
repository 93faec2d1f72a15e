package io.idem.cli;

import io.idem.proto.AuthReply;
import io.idem.proto.AuthRequest;
import io.idem.proto.Code;
import io.idem.proto.Permission;
import io.idem.proto.Role;
import io.idem.proto.UserRoles;
import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

/**
 * {@code idem auth}: the cluster's access control (docs/SECURITY.md). Principals are client
 * certificates' subjects; roles hold permissions; changes go through the log, and only the role
 * admin may make them while auth is on.
 */
@Command(
    name = "auth",
    mixinStandardHelpOptions = true,
    description =
        "Access control: principals (client certificate subjects) hold roles, roles hold"
            + " permissions on KV prefixes, key scopes and lease names. Admin only.",
    subcommands = {
      AuthCommand.Show.class,
      AuthCommand.Enable.class,
      AuthCommand.Disable.class,
      AuthCommand.RoleCommand.class,
      AuthCommand.Grant.class,
      AuthCommand.Revoke.class
    })
final class AuthCommand {

  /**
   * Sends {@code request} to the leader (of every group, for a change), prints the access control
   * after it; the exit code.
   */
  static int run(ClientOptions options, CommandSpec spec, AuthRequest request)
      throws InterruptedException {
    LeaderCall<AuthReply> call =
        new LeaderCall<>(
            (stub, left) -> stub.auth(request), AuthReply::getCode, AuthReply::getLeaderHint);
    // A change goes to every Raft group (each holds the access control it decides by); a read to
    // one.
    AuthReply reply =
        request.getChangeCase() == AuthRequest.ChangeCase.CHANGE_NOT_SET
            ? call.send(options)
            : call.sendToEveryGroup(options);
    if (reply.getCode() != Code.OK) {
      spec.commandLine().getErr().println("idem: " + reply.getCode() + ": " + reply.getMessage());
      return 1;
    }
    print(spec.commandLine().getOut(), reply);
    return 0;
  }

  /** One line for auth, one per role, one per principal. */
  static void print(PrintWriter out, AuthReply r) {
    out.println("auth " + (r.getEnabled() ? "on" : "off (anyone may do anything)"));
    for (Role role : r.getRolesList()) {
      StringBuilder line = new StringBuilder("role " + role.getName());
      if (role.getAdmin()) {
        line.append(" admin");
      }
      for (Permission p : role.getPermissionsList()) {
        line.append(' ')
            .append(p.getKind().name().toLowerCase(java.util.Locale.ROOT).replace('_', '-'))
            .append('=')
            .append(p.getPrefix().isEmpty() ? "\"\"" : p.getPrefix());
      }
      String quotas = io.idem.server.QuotaFlags.format(role.getQuotas());
      if (!quotas.isEmpty()) {
        line.append(" quotas ").append(quotas);
      }
      out.println(line);
    }
    for (UserRoles u : r.getUsersList()) {
      out.println("principal " + u.getPrincipal() + " roles " + String.join(",", u.getRolesList()));
    }
  }

  @Command(
      name = "show",
      mixinStandardHelpOptions = true,
      description = "Prints whether auth is on, the roles and who holds them.")
  static final class Show implements Callable<Integer> {
    @Mixin ClientOptions options;
    @Spec CommandSpec spec;

    @Override
    public Integer call() throws InterruptedException {
      return run(options, spec, AuthRequest.getDefaultInstance());
    }
  }

  @Command(
      name = "enable",
      mixinStandardHelpOptions = true,
      description =
          "Turns auth on, giving the role admin to the principal named (keep one admin you can"
              + " act as, or no one can change access control again).")
  static final class Enable implements Callable<Integer> {
    @Mixin ClientOptions options;
    @Spec CommandSpec spec;

    @Option(
        names = "--admin",
        required = true,
        description = "The admin's certificate subject, e.g. 'CN=admin,O=Example'.")
    String admin;

    @Override
    public Integer call() throws InterruptedException {
      return run(options, spec, AuthRequest.newBuilder().setEnableWithAdmin(admin).build());
    }
  }

  @Command(
      name = "disable",
      mixinStandardHelpOptions = true,
      description = "Turns auth off: anyone who reaches the client port may do anything.")
  static final class Disable implements Callable<Integer> {
    @Mixin ClientOptions options;
    @Spec CommandSpec spec;

    @Override
    public Integer call() throws InterruptedException {
      return run(options, spec, AuthRequest.newBuilder().setDisable(true).build());
    }
  }

  @Command(
      name = "role",
      mixinStandardHelpOptions = true,
      description = "Creates, replaces or deletes a role.",
      subcommands = {RolePut.class, RoleDelete.class})
  static final class RoleCommand {}

  @Command(
      name = "put",
      mixinStandardHelpOptions = true,
      description =
          "Creates a role, or replaces one, with the permissions given (each option may repeat;"
              + " a prefix \"\" covers everything).")
  static final class RolePut implements Callable<Integer> {
    @Mixin ClientOptions options;
    @Spec CommandSpec spec;

    @Parameters(index = "0", description = "The role's name.")
    String name;

    @Option(names = "--kv-read", description = "Get on KV keys under this prefix.")
    List<String> kvRead = new ArrayList<>();

    @Option(
        names = "--kv-write",
        description = "Get, put, delete, compare-and-set, increment and append under this prefix.")
    List<String> kvWrite = new ArrayList<>();

    @Option(
        names = "--key-scope",
        description = "Idempotency keys whose scope starts with this prefix (and fences in it).")
    List<String> keyScope = new ArrayList<>();

    @Option(names = "--lease", description = "Leases whose name starts with this prefix.")
    List<String> lease = new ArrayList<>();

    @Option(
        names = "--quota",
        description =
            "A quota for the principals holding this role, in place of the configured default,"
                + " e.g. --quota key_records=500000 --quota kv_bytes=1GiB. Quotas: sessions,"
                + " saved_bytes, key_records, key_bytes, kv_keys, kv_bytes, leases, list_length.")
    java.util.Map<String, String> quotas = new java.util.LinkedHashMap<>();

    @Override
    public Integer call() throws InterruptedException {
      Role.Builder r = Role.newBuilder().setName(name);
      if (!quotas.isEmpty()) {
        try {
          r.setQuotas(io.idem.server.QuotaFlags.parse(quotas));
        } catch (IllegalArgumentException e) {
          spec.commandLine().getErr().println("idem: " + e.getMessage());
          return 2;
        }
      }
      add(r, Permission.Kind.KV_READ, kvRead);
      add(r, Permission.Kind.KV_READ_WRITE, kvWrite);
      add(r, Permission.Kind.KEY_SCOPE, keyScope);
      add(r, Permission.Kind.LEASE, lease);
      return run(options, spec, AuthRequest.newBuilder().setPutRole(r).build());
    }

    private static void add(Role.Builder r, Permission.Kind kind, List<String> prefixes) {
      for (String p : prefixes) {
        r.addPermissions(Permission.newBuilder().setKind(kind).setPrefix(p));
      }
    }
  }

  @Command(
      name = "delete",
      mixinStandardHelpOptions = true,
      description = "Deletes a role and takes it from every principal.")
  static final class RoleDelete implements Callable<Integer> {
    @Mixin ClientOptions options;
    @Spec CommandSpec spec;

    @Parameters(index = "0", description = "The role's name.")
    String name;

    @Override
    public Integer call() throws InterruptedException {
      return run(options, spec, AuthRequest.newBuilder().setDeleteRole(name).build());
    }
  }

  /** A change of one principal's roles. */
  abstract static class PrincipalRoles implements Callable<Integer> {
    @Mixin ClientOptions options;
    @Spec CommandSpec spec;

    @Parameters(index = "0", description = "The principal: a certificate subject, RFC 2253.")
    String principal;

    @Parameters(index = "1..*", arity = "1..*", description = "The roles.")
    List<String> roles;

    /** The request that carries {@code change}. */
    abstract AuthRequest request(UserRoles change);

    @Override
    public Integer call() throws InterruptedException {
      return run(
          options,
          spec,
          request(UserRoles.newBuilder().setPrincipal(principal).addAllRoles(roles).build()));
    }
  }

  @Command(
      name = "grant",
      mixinStandardHelpOptions = true,
      description = "Gives a principal roles.")
  static final class Grant extends PrincipalRoles {
    @Override
    AuthRequest request(UserRoles change) {
      return AuthRequest.newBuilder().setGrant(change).build();
    }
  }

  @Command(
      name = "revoke",
      mixinStandardHelpOptions = true,
      description = "Takes roles from a principal.")
  static final class Revoke extends PrincipalRoles {
    @Override
    AuthRequest request(UserRoles change) {
      return AuthRequest.newBuilder().setRevoke(change).build();
    }
  }
}
