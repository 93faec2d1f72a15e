package io.idem.examples.payments;

import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.nio.charset.StandardCharsets;

/**
 * The payments service's own problems (RFC 9457), apart from the Idempotency-Key filter's: each
 * type is the URL of a page this service serves at {@value #PATH}{@code <name>} ({@link Pages}), as
 * the filter does for its own at {@code /problems/idempotency/}.
 */
enum PaymentsProblem {
  NOT_FOUND(
      "not-found",
      404,
      "No such resource",
      "The service has no resource at this path: it serves <code>GET /accounts/{account}</code>,"
          + " <code>POST /accounts/{account}/withdrawals</code> and"
          + " <code>GET /accounts/{account}/withdrawals/{id}</code>."),
  NO_SUCH_ACCOUNT(
      "no-such-account",
      404,
      "No such account",
      "The account in the path was never opened. Nothing was debited."),
  BAD_WITHDRAWAL(
      "bad-withdrawal",
      400,
      "Bad withdrawal",
      "The body must be <code>{\"amount\": N}</code> with a whole N of at least 1. Nothing was"
          + " debited; fix the body and send it with a new Idempotency-Key (the answer was stored"
          + " under this one)."),
  INSUFFICIENT_FUNDS(
      "insufficient-funds",
      402,
      "Insufficient funds",
      "The account's balance is less than the amount: nothing was debited. The answer is final"
          + " for this withdrawal: it is stored under its Idempotency-Key, and a retry with that key"
          + " gets it again. Withdraw less, or fund the account, with a new key. The status is 402"
          + " so that no client mistakes it for the filter's 422 (key reused) or 409 (key in"
          + " progress: retry later)."),
  NO_SUCH_WITHDRAWAL(
      "no-such-withdrawal",
      404,
      "No such withdrawal",
      "No withdrawal with this id from this account is stored for this caller: it was never made,"
          + " made from another account, refused, still running, or its key has passed its"
          + " retention (24 h after completion). Withdrawals are read from the key store's record"
          + " of the POST, under the caller's scope (X-Client-Id, else the service's anonymous"
          + " scope).");

  /** Where the pages are, and what every type starts with after the origin. */
  static final String PATH = "/problems/payments/";

  final String id;
  final int status;
  final String title;
  final String documentation;

  PaymentsProblem(String id, int status, String title, String documentation) {
    this.id = id;
    this.status = status;
    this.title = title;
    this.documentation = documentation;
  }

  /** The type's URL on the origin {@code request} reached. */
  String type(HttpServletRequest request) {
    String url = request.getRequestURL().toString();
    int pathStart = url.indexOf('/', url.indexOf("://") + 3);
    return (pathStart < 0 ? url : url.substring(0, pathStart))
        + request.getContextPath()
        + PATH
        + id;
  }

  /** Answers {@code request} with this problem, {@code detail} saying what happened to it. */
  void send(HttpServletRequest request, HttpServletResponse response, String detail)
      throws IOException {
    byte[] b =
        ("{\"type\":"
                + Json.quote(type(request))
                + ",\"title\":"
                + Json.quote(title)
                + ",\"status\":"
                + status
                + ",\"detail\":"
                + Json.quote(detail)
                + ",\"instance\":"
                + Json.quote(request.getRequestURI())
                + "}")
            .getBytes(StandardCharsets.UTF_8);
    response.setStatus(status);
    response.setContentType("application/problem+json");
    response.setContentLength(b.length);
    response.getOutputStream().write(b);
  }

  /** Serves each problem's page at {@link #PATH}{@code <name>}. */
  static final class Pages extends HttpServlet {
    private static final long serialVersionUID = 1L;

    @Override
    protected void doGet(HttpServletRequest req, HttpServletResponse resp) throws IOException {
      String name = String.valueOf(req.getPathInfo()).substring(1);
      for (PaymentsProblem p : values()) {
        if (p.id.equals(name)) {
          byte[] page =
              ("<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>"
                      + p.title
                      + "</title>\n</head>\n<body>\n<h1>"
                      + p.title
                      + "</h1>\n<p>HTTP status "
                      + p.status
                      + ", from the payments example service.</p>\n<p>"
                      + p.documentation
                      + "</p>\n</body>\n</html>\n")
                  .getBytes(StandardCharsets.UTF_8);
          resp.setStatus(200);
          resp.setContentType("text/html; charset=utf-8");
          resp.setContentLength(page.length);
          resp.getOutputStream().write(page);
          return;
        }
      }
      NOT_FOUND.send(req, resp, "no problem type named " + name);
    }
  }

  /** JSON strings. */
  static final class Json {
    private Json() {}

    /** {@code s} as a JSON string literal. */
    static String quote(String s) {
      StringBuilder b = new StringBuilder(s.length() + 2).append('"');
      for (int i = 0; i < s.length(); i++) {
        char c = s.charAt(i);
        if (c == '"' || c == '\\') {
          b.append('\\').append(c);
        } else if (c < 0x20) {
          b.append(String.format("\\u%04x", (int) c));
        } else {
          b.append(c);
        }
      }
      return b.append('"').toString();
    }
  }
}
