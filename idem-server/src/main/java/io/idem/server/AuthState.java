package io.idem.server;

import io.idem.core.SnapshotFormatException;
import io.idem.proto.AuthReply;
import io.idem.proto.AuthRequest;
import io.idem.proto.Code;
import io.idem.proto.CommitCursor;
import io.idem.proto.CursorStep;
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
 * name order {@code string name, byte flags (1: admin, 2: quotas follow), int permissions}, per
 * permission {@code int kind, string prefix}, then with flag 2 a {@code long} per quota in {@link
 * Quotas#NAMES} order; {@code int users}, per principal in order {@code string principal, int
 * roles}, per role {@code string name}. Older snapshots have none: auth off, no roles. A role
 * without quotas is written as before roles had them.
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

  /** The bit of a role's flags byte in the snapshot that says its quotas follow. */
  private static final int QUOTAS_FLAG = 2;

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
   * {@code KEY_SCOPE} on the scope, and a complete's effect what that write needs; a cursor's claim
   * or commit {@code KV_READ_WRITE} on the cursor's key, and a commit's steps what their writes and
   * completions need.
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
      case CLAIM_CURSOR -> write(principal, op.getClaimCursor().getKey(), null);
      case COMMIT_CURSOR -> commitDenial(principal, op.getCommitCursor());
      case OP_NOT_SET -> null; // answered INVALID_ARGUMENT by the state machine
    };
  }

  /** A cursor commit: a write of the cursor, and of each step's effect and key completion. */
  private String commitDenial(String principal, CommitCursor c) {
    String d = write(principal, c.getKey(), null);
    for (CursorStep s : c.getStepsList()) {
      if (d == null && s.hasEffect()) {
        d = denial(principal, s.getEffect());
      }
      if (d == null && s.hasComplete()) {
        d = denial(principal, Permission.Kind.KEY_SCOPE, s.getComplete().getScope());
      }
    }
    return d;
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
    return apply(principal, req, true);
  }

  /**
   * Applies an access control command of {@code principal}.
   *
   * @param quotas whether the entry is of log format 7 or later: only then does a role keep its
   *     quotas (an older entry's role is stored without them, as older code stored it)
   */
  AuthReply apply(String principal, AuthRequest req, boolean quotas) {
    if (!quotas && req.hasPutRole() && req.getPutRole().hasQuotas()) {
      req = req.toBuilder().setPutRole(req.getPutRole().toBuilder().clearQuotas()).build();
    }
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
    if (r.hasQuotas()) {
      String bad = Quotas.problem(r.getQuotas());
      if (bad != null) {
        return "role " + name + ": " + bad;
      }
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

  /**
   * The quotas of {@code principal}: {@code defaults}, except where a role it holds sets one (the
   * largest value any sets); none ({@link Quotas#UNLIMITED}) if it holds the role admin.
   */
  Quotas quotasOf(String principal, Quotas defaults) {
    Grants g = grantsOf(principal);
    if (g.admin) {
      return Quotas.UNLIMITED;
    }
    if (g.quotas == null) {
      return defaults;
    }
    // Identity on purpose: a cache of the last defaults object this principal was resolved under.
    @SuppressWarnings("ReferenceEquality")
    boolean stale = g.effective == null || g.base != defaults;
    if (stale) {
      g.base = defaults;
      g.effective = defaults.under(g.quotas);
    }
    return g.effective;
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

  /**
   * One principal's permissions and role quotas, gathered from its roles; and its quotas as last
   * computed (from which defaults).
   */
  private static final class Grants {
    final boolean admin;
    final List<Permission> permissions;

    /** Per quota, the largest value a role sets (0: none sets it); null if no role sets any. */
    final long[] quotas;

    Quotas base;
    Quotas effective;

    Grants(boolean admin, List<Permission> permissions, long[] quotas) {
      this.admin = admin;
      this.permissions = permissions;
      this.quotas = quotas;
    }

    @SuppressWarnings("NonApiType") // private to AuthState, whose users map holds TreeSets
    static Grants of(TreeSet<String> held, Map<String, Role> roles) {
      if (held == null) {
        return new Grants(false, List.of(), null);
      }
      boolean admin = held.contains(ADMIN);
      List<Permission> all = new ArrayList<>();
      long[] quotas = null;
      for (String name : held) {
        Role r = roles.get(name);
        if (r != null) {
          all.addAll(r.getPermissionsList());
          if (r.hasQuotas()) {
            long[] v = Quotas.values(r.getQuotas());
            quotas = quotas == null ? new long[v.length] : quotas;
            for (int i = 0; i < v.length; i++) {
              quotas[i] = Math.max(quotas[i], v[i]);
            }
          }
        }
      }
      return new Grants(admin, List.copyOf(all), quotas);
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
      out.writeByte((r.getAdmin() ? 1 : 0) | (r.hasQuotas() ? QUOTAS_FLAG : 0));
      out.writeInt(r.getPermissionsCount());
      for (Permission p : r.getPermissionsList()) {
        out.writeInt(p.getKindValue());
        StateSection.writeString(out, p.getPrefix());
      }
      if (r.hasQuotas()) {
        for (long v : Quotas.values(r.getQuotas())) {
          out.writeLong(v);
        }
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
      int flags = in.readByte();
      r.setAdmin((flags & 1) != 0);
      int permissions = StateSection.count(in.readInt(), "permission");
      for (int j = 0; j < permissions; j++) {
        int kind = in.readInt();
        if (Permission.Kind.forNumber(kind) == null || kind == 0) {
          throw new SnapshotFormatException("role " + r.getName() + ": permission kind " + kind);
        }
        r.addPermissions(
            Permission.newBuilder().setKindValue(kind).setPrefix(StateSection.readString(in)));
      }
      if ((flags & QUOTAS_FLAG) != 0) {
        long[] v = new long[Quotas.NAMES.size()];
        for (int k = 0; k < v.length; k++) {
          v[k] = in.readLong();
        }
        r.setQuotas(Quotas.of(v).toProto());
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
