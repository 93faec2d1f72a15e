package io.idem.http;

import jakarta.servlet.ServletOutputStream;
import jakarta.servlet.WriteListener;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import jakarta.servlet.http.HttpServletResponseWrapper;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.nio.charset.Charset;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * Holds the handler's body in memory, up to {@code limit} bytes, so that the filter can store it
 * before anything reaches the client; status and headers go to the wrapped response as usual (not
 * committed). Nothing is sent until {@link #sendCaptured}, unless the body outgrows the limit: then
 * what was held and everything after it pass through to the client ({@link #overflowed()}), and the
 * response cannot be replayed.
 *
 * <p>{@code sendError} becomes the status and an RFC 9457 problem body, written here, so that the
 * first answer and its replays are the same bytes (the container's error page would not be stored).
 * Not thread-safe, like the response it wraps.
 */
final class CapturingResponse extends HttpServletResponseWrapper {
  private final int limit;
  private final HttpServletRequest request;
  private final ProblemTypes problemTypes;
  private final ByteArrayOutputStream held = new ByteArrayOutputStream();
  private @Nullable ServletOutputStream stream;
  private @Nullable PrintWriter writer;
  private @Nullable ServletOutputStream passThrough;
  private boolean closed;

  /** Holds {@code response}'s body for {@code request}, whose problems get {@code problemTypes}. */
  CapturingResponse(
      HttpServletResponse response,
      int limit,
      HttpServletRequest request,
      ProblemTypes problemTypes) {
    super(response);
    this.limit = limit;
    this.request = request;
    this.problemTypes = problemTypes;
  }

  /** Whether the body outgrew the limit and went to the client as it was written. */
  boolean overflowed() {
    return passThrough != null;
  }

  /** The body held so far (complete unless {@link #overflowed()}). */
  byte[] body() {
    if (writer != null) {
      writer.flush();
    }
    return held.toByteArray();
  }

  /** Sends the held body (with its length) to the client; after an overflow, flushes the rest. */
  void sendCaptured() throws IOException {
    byte[] body = body();
    HttpServletResponse real = (HttpServletResponse) getResponse();
    if (passThrough != null) {
      passThrough.flush();
      return;
    }
    real.setContentLength(body.length);
    real.getOutputStream().write(body);
  }

  private void write(byte[] b, int off, int len) throws IOException {
    if (closed) {
      return; // after sendError or sendRedirect the body is final, as in a container
    }
    if (passThrough == null && held.size() + len > limit) {
      passThrough = getResponse().getOutputStream();
      passThrough.write(held.toByteArray());
    }
    if (passThrough != null) {
      passThrough.write(b, off, len);
    } else {
      held.write(b, off, len);
    }
  }

  @Override
  public ServletOutputStream getOutputStream() {
    if (writer != null) {
      throw new IllegalStateException("getWriter() was called on this response");
    }
    if (stream == null) {
      stream = new HeldStream();
    }
    return stream;
  }

  @Override
  public PrintWriter getWriter() {
    if (stream != null && writer == null) {
      throw new IllegalStateException("getOutputStream() was called on this response");
    }
    if (writer == null) {
      // ISO-8859-1 is the servlet default when the application names no charset, and the
      // fallback when it names one that is not a legal name or not known to the JVM. Throwing
      // there instead (Charset.forName's unchecked exception, or the UnsupportedEncodingException
      // the spec allows) would fail the request once the handler may have made its effects: the
      // key would be released and a retry would run the step again. With the fallback the
      // response is stored and replayed like any other, in ISO-8859-1 (characters outside it
      // become '?') and labelled so, as a container that ignores an unknown charset does.
      String encoding = getCharacterEncoding();
      Charset charset = encoding == null ? null : BufferedRequest.charsetOrNull(encoding);
      if (charset == null) {
        charset = StandardCharsets.ISO_8859_1;
      }
      setCharacterEncoding(charset.name()); // into Content-Type, as the container's writer does
      writer = new PrintWriter(new OutputStreamWriter(new HeldStream(), charset));
    }
    return writer;
  }

  @Override
  public void flushBuffer() throws IOException {
    if (writer != null) {
      writer.flush();
    }
    if (passThrough != null) {
      passThrough.flush();
    }
  }

  @Override
  public boolean isCommitted() {
    return passThrough != null && super.isCommitted();
  }

  @Override
  public void setContentLength(int len) {
    // The filter sets the length of what it sends.
  }

  @Override
  public void setContentLengthLong(long len) {
    // As setContentLength.
  }

  @Override
  public void setBufferSize(int size) {
    // The body is held up to the limit whatever the buffer size.
  }

  @Override
  public int getBufferSize() {
    return limit;
  }

  @Override
  public void resetBuffer() {
    if (passThrough != null) {
      throw new IllegalStateException("the response is committed");
    }
    if (writer != null) {
      writer.flush();
    }
    held.reset();
  }

  @Override
  public void reset() {
    resetBuffer();
    super.reset();
    closed = false;
  }

  @Override
  public void sendError(int sc) throws IOException {
    sendError(sc, null);
  }

  @Override
  public void sendError(int sc, @Nullable String msg) throws IOException {
    resetBuffer();
    Problem p = Problem.fromHandler(sc, msg);
    setStatus(sc);
    setContentType(Problem.MEDIA_TYPE);
    byte[] body =
        p.json(problemTypes.uri(request, ProblemType.HANDLER_ERROR), request.getRequestURI());
    write(body, 0, body.length);
    closed = true;
  }

  @Override
  public void sendRedirect(String location) throws IOException {
    resetBuffer();
    setStatus(SC_FOUND);
    setHeader("Location", location);
    closed = true;
  }

  private final class HeldStream extends ServletOutputStream {
    @Override
    public void write(int b) throws IOException {
      CapturingResponse.this.write(new byte[] {(byte) b}, 0, 1);
    }

    @Override
    public void write(byte[] b, int off, int len) throws IOException {
      CapturingResponse.this.write(b, off, len);
    }

    @Override
    public boolean isReady() {
      return true;
    }

    @Override
    public void setWriteListener(WriteListener listener) {
      throw new IllegalStateException("the idempotency filter does not support async writes");
    }
  }

  /**
   * What is stored for this response: its status, the {@code replayedHeaders} it has and its body;
   * or a 409 problem ({@code response-not-stored}) if it overflowed or its record is longer than
   * the limit.
   */
  StoredResponse toStored(List<String> replayedHeaders) {
    List<StoredResponse.Header> headers = new ArrayList<>();
    for (String name : replayedHeaders) {
      if (name.equalsIgnoreCase("Content-Type")) {
        if (getContentType() != null) {
          headers.add(new StoredResponse.Header("Content-Type", getContentType()));
        }
        continue;
      }
      Collection<String> values = getHeaders(name);
      for (String v : values) {
        headers.add(new StoredResponse.Header(name, v));
      }
    }
    StoredResponse stored = new StoredResponse(getStatus(), headers, body(), false);
    if (!overflowed() && stored.encode().length <= limit) {
      return stored;
    }
    Problem tooLarge =
        new Problem(
            ProblemType.RESPONSE_NOT_STORED,
            "the request was processed (status "
                + getStatus()
                + "), but its response was larger than the "
                + limit
                + " bytes kept for replay");
    return new StoredResponse(
        409,
        List.of(new StoredResponse.Header("Content-Type", Problem.MEDIA_TYPE)),
        tooLarge.json(
            problemTypes.uri(request, ProblemType.RESPONSE_NOT_STORED), request.getRequestURI()),
        false);
  }
}
