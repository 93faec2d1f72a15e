package io.idem.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

/** {@code idem.keys.problem-types.*}: a base or a path, and a bad value named at startup. */
class ProblemTypesPropertiesTest {

  @Test
  void aBaseAndAMovedPathTogetherAreRefusedAndBadValuesNamed() {
    IdemKeysProperties.ProblemTypes p = new IdemKeysProperties.ProblemTypes();
    assertThat(p.toFilterSetting()).hasToString("pages served at /problems/idempotency/");
    p.setBase("https://docs.example.com/errors/");
    assertThat(p.toFilterSetting()).hasToString("pages at https://docs.example.com/errors/");
    p.setPath("/docs/errors/");
    assertThatThrownBy(p::toFilterSetting)
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("not both");
    p.setBase(null);
    assertThat(p.toFilterSetting()).hasToString("pages served at /docs/errors/");
    p.setPath("docs");
    assertThatThrownBy(p::toFilterSetting).hasMessageContaining("got docs");
    p.setPath(io.idem.http.ProblemTypes.DEFAULT_PATH);
    p.setBase("errors/");
    assertThatThrownBy(p::toFilterSetting).hasMessageContaining("got errors/");
  }
}
