package io.idem.cli;

import io.idem.client.Fence;
import io.idem.client.IdemClient;
import picocli.CommandLine.ITypeConverter;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;
import picocli.CommandLine.TypeConversionException;

/**
 * {@code --fence KEY:TOKEN} and {@code --fence-scope SCOPE}: a kv write guarded by an idempotency
 * key's token (see {@code idem key acquire}), so that a stale owner's write is refused.
 */
final class FenceOptions {
  @Spec(Spec.Target.MIXEE)
  CommandSpec spec;

  @Option(
      names = "--fence",
      paramLabel = "KEY:TOKEN",
      converter = KeyToken.Converter.class,
      description =
          "Apply the write only while the idempotency key KEY (in --fence-scope) is held under"
              + " TOKEN, the token `idem key acquire` printed. Refused (exit 1, nothing written)"
              + " once another owner took the key over, or it was released or expired. TOKEN"
              + " follows the last ':', so KEY may contain ':'.")
  KeyToken fence;

  @Option(
      names = "--fence-scope",
      paramLabel = "SCOPE",
      description = "The scope of the --fence key. Default: empty.")
  String scope;

  /** The parsed {@code --fence} value. */
  record KeyToken(String key, long token) {
    /** Splits at the last ':'; the key is 1 to 255 characters, the token positive. */
    static final class Converter implements ITypeConverter<KeyToken> {
      @Override
      public KeyToken convert(String value) {
        int colon = value.lastIndexOf(':');
        if (colon < 0) {
          throw new TypeConversionException("'" + value + "' is not KEY:TOKEN");
        }
        String key = value.substring(0, colon);
        long token;
        try {
          token = Long.parseLong(value.substring(colon + 1));
        } catch (NumberFormatException e) {
          throw new TypeConversionException("'" + value + "' is not KEY:TOKEN (TOKEN a number)");
        }
        String problem = KeyCommand.keyPartProblem("the fence KEY", key, false);
        problem = problem != null ? problem : KeyCommand.tokenProblem(token);
        if (problem != null) {
          throw new TypeConversionException(problem);
        }
        return new KeyToken(key, token);
      }
    }
  }

  /**
   * A client from {@code options} whose writes carry the fence, if {@code --fence} was given. The
   * fence is checked before any connection is made. Closing the client (the fenced view shares its
   * session) closes both.
   */
  IdemClient client(ClientOptions options) {
    if (fence == null) {
      if (scope != null) {
        throw new ParameterException(spec.commandLine(), "--fence-scope needs --fence");
      }
      return options.client();
    }
    String s = scope == null ? "" : scope;
    String problem = KeyCommand.keyPartProblem("--fence-scope", s, true);
    if (problem != null) {
      throw new ParameterException(spec.commandLine(), problem);
    }
    Fence f = new Fence(s, fence.key(), fence.token());
    return options.client().fenced(f);
  }
}
