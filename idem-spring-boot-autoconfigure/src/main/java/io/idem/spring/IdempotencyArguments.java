package io.idem.spring;

import io.idem.http.IdempotentRequest;
import jakarta.servlet.http.HttpServletRequest;
import org.springframework.core.MethodParameter;
import org.springframework.web.bind.support.WebDataBinderFactory;
import org.springframework.web.context.request.NativeWebRequest;
import org.springframework.web.method.support.HandlerMethodArgumentResolver;
import org.springframework.web.method.support.ModelAndViewContainer;

/**
 * Resolves handler parameters: a {@code String} annotated {@link IdempotencyKey} to the request's
 * key, and an {@link IdempotentRequest} to the filter's view of the request (both null when the
 * request carries no key or is not covered). Stateless.
 */
final class IdempotencyArguments implements HandlerMethodArgumentResolver {

  @Override
  public boolean supportsParameter(MethodParameter parameter) {
    return parameter.getParameterType() == IdempotentRequest.class
        || (parameter.hasParameterAnnotation(IdempotencyKey.class)
            && parameter.getParameterType() == String.class);
  }

  @Override
  public Object resolveArgument(
      MethodParameter parameter,
      ModelAndViewContainer mavContainer,
      NativeWebRequest webRequest,
      WebDataBinderFactory binderFactory) {
    HttpServletRequest request = webRequest.getNativeRequest(HttpServletRequest.class);
    if (request == null) {
      return null;
    }
    IdempotentRequest r = IdempotentRequest.of(request).orElse(null);
    if (parameter.getParameterType() == IdempotentRequest.class) {
      return r;
    }
    return r == null ? null : r.key().key();
  }
}
