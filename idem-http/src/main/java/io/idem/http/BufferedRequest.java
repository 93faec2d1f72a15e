package io.idem.http;

import io.idem.keys.Fingerprint;
import jakarta.servlet.ReadListener;
import jakarta.servlet.ServletInputStream;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletRequestWrapper;
import java.io.BufferedReader;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.UnsupportedEncodingException;
import java.net.URLDecoder;
import java.nio.charset.Charset;
import java.nio.charset.IllegalCharsetNameException;
import java.nio.charset.StandardCharsets;
import java.nio.charset.UnsupportedCharsetException;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Enumeration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * The request with its body read once by the filter (to fingerprint it) and served again to the
 * handler. Form parameters ({@code application/x-www-form-urlencoded}) are parsed here from the
 * query and the held body, since the container can no longer read the body itself. Not thread-safe.
 */
final class BufferedRequest extends HttpServletRequestWrapper {
  private final byte[] body;
  private @Nullable Map<String, String[]> parameters;
  private boolean streamTaken;

  BufferedRequest(HttpServletRequest request, byte[] body) {
    super(request);
    this.body = body;
  }

  @Override
  public ServletInputStream getInputStream() {
    streamTaken = true;
    ByteArrayInputStream in = new ByteArrayInputStream(body);
    return new ServletInputStream() {
      @Override
      public int read() {
        return in.read();
      }

      @Override
      public int read(byte[] b, int off, int len) {
        return in.read(b, off, len);
      }

      @Override
      public boolean isFinished() {
        return in.available() == 0;
      }

      @Override
      public boolean isReady() {
        return true;
      }

      @Override
      public void setReadListener(ReadListener listener) {
        throw new IllegalStateException("the idempotency filter does not support async reads");
      }
    };
  }

  /**
   * The charset named {@code name}, or null if the name is not a legal charset name or this JVM has
   * no such charset.
   */
  static @Nullable Charset charsetOrNull(String name) {
    try {
      return Charset.forName(name);
    } catch (IllegalCharsetNameException | UnsupportedCharsetException e) {
      return null;
    }
  }

  /**
   * The body as text in the request's charset (UTF-8 if it names none).
   *
   * @throws UnsupportedEncodingException if the charset is unknown here, as {@code
   *     ServletRequest.getReader} specifies (the filter answers 415 to such a request, so only one
   *     the application set since can be)
   */
  @Override
  public BufferedReader getReader() throws UnsupportedEncodingException {
    String encoding = getCharacterEncoding();
    Charset charset = encoding == null ? StandardCharsets.UTF_8 : charsetOrNull(encoding);
    if (charset == null) {
      throw new UnsupportedEncodingException(encoding);
    }
    return new BufferedReader(new InputStreamReader(getInputStream(), charset));
  }

  @Override
  public int getContentLength() {
    return body.length;
  }

  @Override
  public long getContentLengthLong() {
    return body.length;
  }

  @Override
  public @Nullable String getParameter(String name) {
    String[] values = parameters().get(name);
    return values == null ? null : values[0];
  }

  @Override
  public Map<String, String[]> getParameterMap() {
    return parameters();
  }

  @Override
  public Enumeration<String> getParameterNames() {
    return Collections.enumeration(parameters().keySet());
  }

  @Override
  public String @Nullable [] getParameterValues(String name) {
    String[] values = parameters().get(name);
    return values == null ? null : values.clone();
  }

  private Map<String, String[]> parameters() {
    if (parameters == null) {
      Map<String, List<String>> all = new LinkedHashMap<>();
      // The filter answers 415 to a request whose charset is unknown here; one the application
      // set since and that is unknown too decodes the parameters as if none were set.
      String encoding = getCharacterEncoding();
      Charset charset = encoding == null ? null : charsetOrNull(encoding);
      if (charset == null) {
        charset = StandardCharsets.UTF_8;
      }
      parse(getQueryString(), charset, all);
      String type = getContentType();
      if (!streamTaken
          && type != null
          && type.toLowerCase(java.util.Locale.ROOT)
              .startsWith("application/x-www-form-urlencoded")) {
        parse(new String(body, charset), charset, all);
      }
      Map<String, String[]> out = new LinkedHashMap<>();
      all.forEach((k, v) -> out.put(k, v.toArray(new String[0])));
      parameters = Collections.unmodifiableMap(out);
    }
    return parameters;
  }

  private static void parse(String s, Charset charset, Map<String, List<String>> into) {
    if (s == null || s.isEmpty()) {
      return;
    }
    for (String pair : s.split("&")) {
      if (pair.isEmpty()) {
        continue;
      }
      int eq = pair.indexOf('=');
      String k = eq < 0 ? pair : pair.substring(0, eq);
      String v = eq < 0 ? "" : pair.substring(eq + 1);
      into.computeIfAbsent(URLDecoder.decode(k, charset), x -> new ArrayList<>())
          .add(URLDecoder.decode(v, charset));
    }
  }

  /** {@code request}'s body, or null if it is longer than {@code maxBodyBytes}. */
  static byte @Nullable [] readBody(HttpServletRequest request, int maxBodyBytes)
      throws IOException {
    long declared = request.getContentLengthLong();
    if (declared > maxBodyBytes) {
      return null;
    }
    try (InputStream in = request.getInputStream()) {
      byte[] body = in.readNBytes(maxBodyBytes + 1);
      return body.length > maxBodyBytes ? null : body;
    }
  }

  /**
   * The request's fingerprint: the SHA-256 of its method, its target (path and query) and its
   * body's SHA-256.
   */
  Fingerprint fingerprint() {
    String target = getRequestURI() + (getQueryString() == null ? "" : "?" + getQueryString());
    byte[] head = (getMethod() + "\n" + target + "\n").getBytes(StandardCharsets.UTF_8);
    byte[] bodyDigest = sha256(body);
    byte[] all = new byte[head.length + bodyDigest.length];
    System.arraycopy(head, 0, all, 0, head.length);
    System.arraycopy(bodyDigest, 0, all, head.length, bodyDigest.length);
    return Fingerprint.of(all);
  }

  private static byte[] sha256(byte[] b) {
    try {
      return MessageDigest.getInstance("SHA-256").digest(b);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("every JDK has SHA-256", e);
    }
  }
}
