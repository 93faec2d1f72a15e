package io.idem.http;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * The problem names come from {@link ProblemType} alone: each has its documentation page and its
 * row in docs/HTTP.md, and no two share a name. (IdempotencyFilterTest fetches the pages over
 * HTTP.)
 */
class ProblemTypeTest {

  @Test
  void everyNameIsDocumentedOnceInItsPageAndInDocsHttp() throws Exception {
    String reference = Files.readString(Path.of("..", "docs", "HTTP.md"));
    Set<String> names = new HashSet<>();
    for (ProblemType p : ProblemType.values()) {
      assertThat(names.add(p.id())).as("a second " + p.id()).isTrue();
      assertThat(p.id()).matches("[a-z]+(-[a-z]+)*");
      assertThat(p.title()).isNotBlank();
      assertThat(p.documentation())
          .as("problems/" + p.id() + ".html")
          .isNotBlank()
          .contains("<h2>What happened</h2>")
          .contains("<h2>What to do</h2>");
      assertThat(reference).as("docs/HTTP.md names " + p.id()).contains("`" + p.id() + "`");
      assertThat(ProblemType.named(p.id())).isSameAs(p);
    }
    assertThat(ProblemType.named("no-such-problem")).isNull();
  }
}
