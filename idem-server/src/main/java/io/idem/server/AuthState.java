package io.idem.server;

import io.idem.core.SnapshotFormatException;
import io.idem.proto.AuthReply;
import io.idem.proto.AuthRequest;
import io.idem.proto.Code;
import io.idem.proto.Fence;
import io.idem.proto.Operation;
import io.idem.proto.Permission;
import io.idem.proto.Put;
import io.idem.proto.Role;
import io.idem.proto.UserRoles;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * The access-control domain, etcd's RBAC in Idem's terms: whether auth is on, the roles (each a
 * list of {@link Permission}s, or {@code admin}), and which principals hold which roles. A
 * principal is a client certificate's subject (RFC 2253), as the front door authenticated it; the
 * empty string is a caller without one. The role {@value #ADMIN} always exists and allows
 * everything.
 *
 * <p>Replicated like the rest of the state, so every replica decides alike: the principal comes in
 * the command (or from the session it was registered with), and the grants from this domain. With
 * auth off every question is answered yes.
 *
 * <p>Snapshot section 8 (state snapshot version 7): {@code boolean enabled, int roles}, per role in
 * name order {@code string name, boolean admin, int permissions}, per permission {@code int kind,
 * string prefix}; {@code int users}, per principal in order {@code string principal, int roles},
 * per role {@code string name}. Older snapshots have none: auth off, no roles.
 *
 * <p>Deterministic (ordered maps only). Not thread-safe; {@link #isAdmin} and {@link #denial} are
 * read by the front door under the state's lock.
 */
final class AuthState implements StateSection {
  /** The role that allows everything. */
  static final String ADMIN = "admin";

  /** The most roles. */
  static final int MAX_ROLES = 1_000;

  /** The most permissions of one role. */
  static final int MAX_PERMISSIONS_PER_ROLE = 256;

  /** The most principals holding roles. */
  static final int MAX_USERS = 100_000;

  /** The longest role name, in characters. */
  static final int MAX_ROLE_NAME_CHARS = 255;

  /** The longest prefix or principal, in UTF-8 bytes. */
  static final int MAX_NAME_BYTES = 4096;

  private boolean enabled;
  private final TreeMap<String, Role> roles = new TreeMap<>();
  private final TreeMap<String, TreeSet<String>> users = new TreeMap<>();

  /** The permissions of each principal asked about, derived from the above; cleared on change. */
  private final Map<String, Grants> grants = new HashMap<>();

  /** Whether access control is on. */
  boolean enabled() {
    return enabled;
  }

  /** Whether no auth state was ever set: the digest then leaves this section out. */
  boolean pristine() {
    return !enabled && roles.isEmpty() && users.isEmpty();
  }

  /** Whether {@code principal} may do everything: auth is off, or it holds the role admin. */
  boolean isAdmin(String principal) {
    return !enabled || grantsOf(principal).admin;
  }

  /**
   * Why {@code principal} may not do {@code kind} on {@code subject} (a KV key, a key scope or a
   * lease name), or null if it may. {@code KV_READ} is allowed by {@code KV_READ_WRITE} too.
   */
  String denial(String principal, Permission.Kind kind, String subject) {
    if (!enabled) {
      return null;
    }
    Grants g = grantsOf(principal);
    if (g.admin || g.allows(kind, subject)) {
      return null;
    }
    return (principal.isEmpty() ? "a caller without a client certificate" : principal)
        + " has no "
        + kind
        + " permission for \""
        + subject
        + "\"";
  }

  /** Whether {@code principal} may open sessions: auth is off, or it holds a role. */
  boolean mayConnect(String principal) {
    return !enabled || users.containsKey(principal);
  }

  /** Why {@code principal} may not open sessions. */
  String connectDenial(String principal) {
    return (principal.isEmpty() ? "a caller without a client certificate" : principal)
        + " holds no role: with auth on, only principals that hold one may open sessions";
  }

  /**
   * Why the session of {@code principal} may not run {@code op}, or null if it may: a KV write
   * needs {@code KV_READ_WRITE} on its key (and {@code LEASE} on the lease it attaches, and {@code
   * KEY_SCOPE} on its fence's scope); a lease operation {@code LEASE} on the name; a key operation
   * {@code KEY_SCOPE} on the scope, and a complete's effect what that write needs.
   */
  String denial(String principal, Operation op) {
    if (!enabled) {
      return null;
    }
    return switch (op.getOpCase()) {
      case PUT -> {
        Put p = op.getPut();
        String d = write(principal, p.getKey(), p.hasFence() ? p.getFence() : null);
        yield d != null || p.getLease().isEmpty()
            ? d
            : denial(principal, Permission.Kind.LEASE, p.getLease());
      }
      case DELETE ->
          write(
              principal,
              op.getDelete().getKey(),
              op.getDelete().hasFence() ? op.getDelete().getFence() : null);
      case COMPARE_AND_SET ->
          write(
              principal,
              op.getCompareAndSet().getKey(),
              op.getCompareAndSet().hasFence() ? op.getCompareAndSet().getFence() : null);
      case INCREMENT ->
          write(
              principal,
              op.getIncrement().getKey(),
              op.getIncrement().hasFence() ? op.getIncrement().getFence() : null);
      case APPEND ->
          write(
              principal,
              op.getAppend().getKey(),
              op.getAppend().hasFence() ? op.getAppend().getFence() : null);
      case GRANT_LEASE -> denial(principal, Permission.Kind.LEASE, op.getGrantLease().getName());
      case KEEP_ALIVE_LEASE ->
          denial(principal, Permission.Kind.LEASE, op.getKeepAliveLease().getName());
      case REVOKE_LEASE -> denial(principal, Permission.Kind.LEASE, op.getRevokeLease().getName());
      case ACQUIRE_KEY ->
          denial(principal, Permission.Kind.KEY_SCOPE, op.getAcquireKey().getScope());
      case COMPLETE_KEY -> {
        String d = denial(principal, Permission.Kind.KEY_SCOPE, op.getCompleteKey().getScope());
        yield d != null || !op.getCompleteKey().hasEffect()
            ? d
            : denial(principal, op.getCompleteKey().getEffect());
      }
      case RELEASE_KEY ->
          denial(principal, Permission.Kind.KEY_SCOPE, op.getReleaseKey().getScope());
      case RENEW_KEY -> denial(principal, Permission.Kind.KEY_SCOPE, op.getRenewKey().getScope());
      case OP_NOT_SET -> null; // answered INVALID_ARGUMENT by the state machine
    };
  }

  /** A write of {@code key}, fenced by {@code fence} (or null). */
  private String write(String principal, String key, Fence fence) {
    String d = denial(principal, Permission.Kind.KV_READ_WRITE, key);
    return d != null || fence == null
        ? d
        : denial(principal, Permission.Kind.KEY_SCOPE, fence.getScope());
  }

  /** Why {@code principal} may not change the cluster (admin only), or null if it may. */
  String adminDenial(String principal, String what) {
    return isAdmin(principal)
        ? null
        : (principal.isEmpty() ? "a caller without a client certificate" : principal)
            + " may not "
            + what
            + ": it needs the role "
            + ADMIN;
  }

  /** Turns auth on at bootstrap with {@code admin} holding the role admin; nothing if empty. */
  void bootstrap(String admin) {
    if (admin.isEmpty()) {
      return;
    }
    enabled = true;
    users.computeIfAbsent(admin, p -> new TreeSet<>()).add(ADMIN);
    grants.clear();
  }

  /**
   * Applies a change by {@code principal}, or reads the access control (a request without a
   * change); admin only while auth is on. A refusal tells only whether auth is on.
   */
  AuthReply apply(String principal, AuthRequest req) {
    String denied = adminDenial(principal, "read or change access control");
    if (denied != null) {
      return AuthReply.newBuilder()
          .setCode(Code.PERMISSION_DENIED)
          .setMessage(denied)
          .setEnabled(enabled)
          .build();
    }
    if (req.getChangeCase() == AuthRequest.ChangeCase.CHANGE_NOT_SET) {
      return view(AuthReply.newBuilder().setCode(Code.OK));
    }
    String bad = change(req);
    grants.clear();
    return view(
        bad == null
            ? AuthReply.newBuilder().setCode(Code.OK)
            : AuthReply.newBuilder().setCode(Code.INVALID_ARGUMENT).setMessage(bad));
  }

  /** Makes the change; why it is refused (nothing changed), or null. */
  private String change(AuthRequest req) {
    switch (req.getChangeCase()) {
      case ENABLE_WITH_ADMIN -> {
        String admin = req.getEnableWithAdmin();
        String bad = nameProblem("principal", admin);
        if (bad != null) {
          return bad;
        }
        if (!users.containsKey(admin) && users.size() >= MAX_USERS) {
          return "at most " + MAX_USERS + " principals hold roles";
        }
        enabled = true;
        users.computeIfAbsent(admin, p -> new TreeSet<>()).add(ADMIN);
        return null;
      }
      case DISABLE -> {
        enabled = false;
        return null;
      }
      case PUT_ROLE -> {
        Role r = req.getPutRole();
        String bad = roleProblem(r);
        if (bad != null) {
          return bad;
        }
        if (!roles.containsKey(r.getName()) && roles.size() >= MAX_ROLES) {
          return "at most " + MAX_ROLES + " roles";
        }
        roles.put(r.getName(), r);
        return null;
      }
      case DELETE_ROLE -> {
        String name = req.getDeleteRole();
        if (name.equals(ADMIN)) {
          return "the role admin cannot be deleted";
        }
        if (roles.remove(name) == null) {
          return "no role \"" + name + "\"";
        }
        users.values().forEach(held -> held.remove(name));
        users.values().removeIf(TreeSet::isEmpty);
        return null;
      }
      case GRANT -> {
        UserRoles u = req.getGrant();
        String bad = nameProblem("principal", u.getPrincipal());
        if (bad != null) {
          return bad;
        }
        if (u.getRolesCount() == 0) {
          return "a grant names at least one role";
        }
        for (String role : u.getRolesList()) {
          if (!role.equals(ADMIN) && !roles.containsKey(role)) {
            return "no role \"" + role + "\"";
          }
        }
        if (!users.containsKey(u.getPrincipal()) && users.size() >= MAX_USERS) {
          return "at most " + MAX_USERS + " principals hold roles";
        }
        users.computeIfAbsent(u.getPrincipal(), p -> new TreeSet<>()).addAll(u.getRolesList());
        return null;
      }
      case REVOKE -> {
        UserRoles u = req.getRevoke();
        TreeSet<String> held = users.get(u.getPrincipal());
        if (held == null) {
          return "\"" + u.getPrincipal() + "\" holds no role";
        }
        held.removeAll(u.getRolesList());
        if (held.isEmpty()) {
          users.remove(u.getPrincipal());
        }
        return null;
      }
      default -> {
        return "unknown change " + req.getChangeCase();
      }
    }
  }

  private static String roleProblem(Role r) {
    String name = r.getName();
    if (name.isEmpty() || name.length() > MAX_ROLE_NAME_CHARS) {
      return "a role's name has 1 to " + MAX_ROLE_NAME_CHARS + " characters";
    }
    if (name.equals(ADMIN)) {
      return "the role admin is built in";
    }
    if (r.getPermissionsCount() > MAX_PERMISSIONS_PER_ROLE) {
      return "a role has at most " + MAX_PERMISSIONS_PER_ROLE + " permissions";
    }
    for (Permission p : r.getPermissionsList()) {
      if (p.getKind() == Permission.Kind.KIND_UNSPECIFIED
          || p.getKind() == Permission.Kind.UNRECOGNIZED) {
        return "a permission needs a kind (KV_READ, KV_READ_WRITE, KEY_SCOPE or LEASE)";
      }
      String bad = nameProblem("prefix", p.getPrefix());
      if (bad != null) {
        return bad;
      }
    }
    return null;
  }

  private static String nameProblem(String what, String s) {
    return s.getBytes(StandardCharsets.UTF_8).length > MAX_NAME_BYTES
        ? "a " + what + " has at most " + MAX_NAME_BYTES + " bytes"
        : null;
  }

  /** The answer {@code reply} with the access control as it is now. */
  AuthReply view(AuthReply.Builder reply) {
    reply.setEnabled(enabled).addRoles(Role.newBuilder().setName(ADMIN).setAdmin(true));
    reply.addAllRoles(roles.values());
    users.forEach(
        (principal, held) ->
            reply.addUsers(UserRoles.newBuilder().setPrincipal(principal).addAllRoles(held)));
    return reply.build();
  }

  private Grants grantsOf(String principal) {
    Grants g = grants.get(principal);
    if (g == null) {
      g = Grants.of(users.get(principal), roles);
      if (grants.size() > MAX_USERS) {
        grants.clear();
      }
      grants.put(principal, g);
    }
    return g;
  }

  /** One principal's permissions, gathered from its roles. */
  private record Grants(boolean admin, List<Permission> permissions) {
    static Grants of(TreeSet<String> held, Map<String, Role> roles) {
      if (held == null) {
        return new Grants(false, List.of());
      }
      boolean admin = held.contains(ADMIN);
      List<Permission> all = new ArrayList<>();
      for (String name : held) {
        Role r = roles.get(name);
        if (r != null) {
          all.addAll(r.getPermissionsList());
        }
      }
      return new Grants(admin, List.copyOf(all));
    }

    boolean allows(Permission.Kind kind, String subject) {
      for (Permission p : permissions) {
        boolean kindOk =
            p.getKind() == kind
                || (kind == Permission.Kind.KV_READ
                    && p.getKind() == Permission.Kind.KV_READ_WRITE);
        if (kindOk && subject.startsWith(p.getPrefix())) {
          return true;
        }
      }
      return false;
    }
  }

  @Override
  public void writeSection(DataOutputStream out) throws IOException {
    out.writeBoolean(enabled);
    out.writeInt(roles.size());
    for (Role r : roles.values()) {
      StateSection.writeString(out, r.getName());
      out.writeBoolean(r.getAdmin());
      out.writeInt(r.getPermissionsCount());
      for (Permission p : r.getPermissionsList()) {
        out.writeInt(p.getKindValue());
        StateSection.writeString(out, p.getPrefix());
      }
    }
    out.writeInt(users.size());
    for (Map.Entry<String, TreeSet<String>> u : users.entrySet()) {
      StateSection.writeString(out, u.getKey());
      out.writeInt(u.getValue().size());
      for (String role : u.getValue()) {
        StateSection.writeString(out, role);
      }
    }
  }

  @Override
  public void readSection(DataInputStream in, int formatVersion) throws IOException {
    enabled = in.readBoolean();
    int roleCount = StateSection.count(in.readInt(), "role");
    for (int i = 0; i < roleCount; i++) {
      Role.Builder r = Role.newBuilder().setName(StateSection.readString(in));
      r.setAdmin(in.readBoolean());
      int permissions = StateSection.count(in.readInt(), "permission");
      for (int j = 0; j < permissions; j++) {
        int kind = in.readInt();
        if (Permission.Kind.forNumber(kind) == null || kind == 0) {
          throw new SnapshotFormatException("role " + r.getName() + ": permission kind " + kind);
        }
        r.addPermissions(
            Permission.newBuilder().setKindValue(kind).setPrefix(StateSection.readString(in)));
      }
      Role role = r.build();
      String bad = roleProblem(role);
      if (bad != null) {
        throw new SnapshotFormatException("role " + role.getName() + ": " + bad);
      }
      if (roles.put(role.getName(), role) != null) {
        throw new SnapshotFormatException("duplicate role " + role.getName());
      }
    }
    int userCount = StateSection.count(in.readInt(), "principal");
    for (int i = 0; i < userCount; i++) {
      String principal = StateSection.readString(in);
      int held = StateSection.count(in.readInt(), "role of a principal");
      TreeSet<String> names = new TreeSet<>();
      for (int j = 0; j < held; j++) {
        names.add(StateSection.readString(in));
      }
      if (names.isEmpty() || users.put(principal, names) != null) {
        throw new SnapshotFormatException("principal " + principal + " listed twice or bare");
      }
    }
    grants.clear();
  }
}
