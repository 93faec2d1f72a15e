package io.idem.http;

import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.util.regex.Pattern;

/**
 * Where the {@code type} of the filter's problems points: a page that documents the problem, as the
 * Idempotency-Key draft asks ("SHOULD" link to documentation). One of two strategies:
 *
 * <ul>
 *   <li>{@link #servedAt(String)} (the default, at {@value #DEFAULT_PATH}): the filter itself
 *       serves a short page per problem at that path of the application (relative to its context
 *       path), for {@code GET} and {@code HEAD}, and the type is that page's absolute URL on the
 *       request's origin ({@code http://host:port/problems/idempotency/key-reused}). The filter
 *       must be mapped to that path too (the servlet containers' usual {@code /*} is).
 *   <li>{@link #documentedAt(URI)}: the type is the given base followed by the problem's name
 *       ({@code https://docs.example.com/errors/key-reused}), the operator's own pages; the filter
 *       serves none.
 * </ul>
 *
 * <p>The names are those of docs/HTTP.md's table. Immutable and thread-safe.
 */
public abstract sealed class ProblemTypes {

  /** The default path of the pages the filter serves: {@value}. */
  public static final String DEFAULT_PATH = "/problems/idempotency/";

  /** Segments of unreserved characters, none starting with a dot, each followed by a slash. */
  private static final Pattern PATH = Pattern.compile("^/(?:[A-Za-z0-9_~-][A-Za-z0-9._~-]*/)+$");

  private ProblemTypes() {}

  /** The pages served by the filter at {@link #DEFAULT_PATH}. */
  public static ProblemTypes defaults() {
    return Served.DEFAULT;
  }

  /**
   * Pages served by the filter at {@code path} (relative to the context path): a page per problem
   * at {@code path + name}, and a list of them at {@code path}.
   *
   * @param path starts and ends with {@code /}, segments of letters, digits and {@code -._~} (not
   *     starting with a dot), e.g. {@code /docs/errors/}
   * @throws IllegalArgumentException naming the path otherwise
   */
  public static ProblemTypes servedAt(String path) {
    if (path == null || !PATH.matcher(path).matches()) {
      throw new IllegalArgumentException(
          "the problem pages' path must start and end with / and have segments of letters,"
              + " digits and -._~ (e.g. /docs/errors/), got "
              + path);
    }
    return new Served(path);
  }

  /**
   * Types that point at the operator's own documentation: {@code base} followed by the problem's
   * name. The filter then serves no pages.
   *
   * @param base an absolute URI, typically ending in {@code /} or {@code #}
   * @throws IllegalArgumentException naming the base if it is not absolute, or has no room for a
   *     name after it
   */
  public static ProblemTypes documentedAt(URI base) {
    if (base == null || !base.isAbsolute() || base.isOpaque()) {
      throw new IllegalArgumentException(
          "the problem types' base must be an absolute hierarchical URI (https://...), got "
              + base);
    }
    String text = base.toString();
    try {
      new URI(text + "key-reused");
    } catch (URISyntaxException e) {
      throw new IllegalArgumentException(
          "the problem types' base must take a name at its end, got " + base, e);
    }
    return new Linked(text);
  }

  /** The {@code type} of {@code problem} in an answer to {@code request}. */
  abstract String uri(HttpServletRequest request, ProblemType problem);

  /**
   * Answers {@code request} with a documentation page if it asks for one of these pages; false if
   * it does not (the request goes on).
   */
  abstract boolean serve(HttpServletRequest request, HttpServletResponse response)
      throws IOException;

  /** Pages served by the filter. */
  private static final class Served extends ProblemTypes {
    static final Served DEFAULT = new Served(DEFAULT_PATH);

    private final String path;

    Served(String path) {
      this.path = path;
    }

    @Override
    String uri(HttpServletRequest request, ProblemType problem) {
      return origin(request) + request.getContextPath() + path + problem.id();
    }

    @Override
    boolean serve(HttpServletRequest request, HttpServletResponse response) throws IOException {
      String method = request.getMethod();
      if (!method.equals("GET") && !method.equals("HEAD")) {
        return false;
      }
      String uri = request.getRequestURI();
      String context = request.getContextPath();
      if (!uri.startsWith(context + path)) {
        return false;
      }
      String name = uri.substring(context.length() + path.length());
      String page;
      if (name.isEmpty()) {
        page = index();
      } else {
        ProblemType problem = ProblemType.named(name);
        String documentation = problem == null ? null : problem.documentation();
        if (problem == null || documentation == null) {
          return false; // not one of ours: the application's 404
        }
        page = page(problem, uri(request, problem), documentation);
      }
      byte[] body = page.getBytes(StandardCharsets.UTF_8);
      response.setStatus(200);
      response.setContentType("text/html; charset=utf-8");
      response.setHeader("Cache-Control", "max-age=3600");
      response.setContentLength(body.length);
      if (method.equals("GET")) {
        response.getOutputStream().write(body);
      }
      return true;
    }

    private static String page(ProblemType problem, String type, String documentation) {
      String status =
          problem.status() == 0 ? "the endpoint's own status" : Integer.toString(problem.status());
      return head(problem.title())
          + "<h1>"
          + problem.title()
          + "</h1>\n<p>Problem type <code>"
          + escape(type)
          + "</code>, HTTP status "
          + status
          + ", answered by the Idempotency-Key filter (draft-ietf-httpapi-idempotency-key-header)"
          + " as <code>application/problem+json</code> (RFC 9457).</p>\n"
          + documentation
          + "\n<p><a href=\"./\">Every problem of the filter</a></p>\n</body>\n</html>\n";
    }

    private static String index() {
      StringBuilder b = new StringBuilder(head("Problems of the Idempotency-Key filter"));
      b.append("<h1>Problems of the Idempotency-Key filter</h1>\n<ul>\n");
      for (ProblemType p : ProblemType.values()) {
        b.append("<li><a href=\"")
            .append(p.id())
            .append("\">")
            .append(p.id())
            .append("</a>: ")
            .append(p.title())
            .append("</li>\n");
      }
      return b.append("</ul>\n</body>\n</html>\n").toString();
    }

    private static String head(String title) {
      return "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>"
          + title
          + "</title>\n</head>\n<body>\n";
    }

    /** Scheme and authority as the request reached the server. */
    private static String origin(HttpServletRequest request) {
      String url = request.getRequestURL().toString();
      int authority = url.indexOf("://") + 3;
      int pathStart = url.indexOf('/', authority);
      return pathStart < 0 ? url : url.substring(0, pathStart);
    }

    private static String escape(String s) {
      return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;");
    }

    @Override
    public String toString() {
      return "pages served at " + path;
    }
  }

  /** The operator's own pages. */
  private static final class Linked extends ProblemTypes {
    private final String base;

    Linked(String base) {
      this.base = base;
    }

    @Override
    String uri(HttpServletRequest request, ProblemType problem) {
      return base + problem.id();
    }

    @Override
    boolean serve(HttpServletRequest request, HttpServletResponse response) {
      return false;
    }

    @Override
    public String toString() {
      return "pages at " + base;
    }
  }
}
