package io.idem.spring;

import io.idem.http.IdempotencyFilter;
import io.idem.http.IdempotencyPolicy;
import jakarta.servlet.http.HttpServletRequest;
import java.lang.reflect.Method;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.convert.DurationStyle;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.web.method.HandlerMethod;
import org.springframework.web.servlet.HandlerExecutionChain;
import org.springframework.web.servlet.mvc.method.annotation.RequestMappingHandlerMapping;
import org.springframework.web.util.ServletRequestPathUtils;

/**
 * Each request's policy from its handler method's {@link Idempotent} (or its controller's): the
 * filter runs before the {@code DispatcherServlet}, so it asks Spring MVC's handler mapping which
 * method will serve the request. A request with no {@code @Idempotent} handler is not covered,
 * unless {@code idem.keys.all-endpoints} is set. Policies are computed once per method.
 * Thread-safe.
 */
final class HandlerPolicies implements IdempotencyFilter.PolicyResolver {
  private final ObjectProvider<RequestMappingHandlerMapping> mappings;
  private final IdemKeysProperties properties;
  private final Map<Method, Optional<IdempotencyPolicy>> byMethod = new ConcurrentHashMap<>();

  HandlerPolicies(
      ObjectProvider<RequestMappingHandlerMapping> mappings, IdemKeysProperties properties) {
    this.mappings = mappings;
    this.properties = properties;
  }

  @Override
  public IdempotencyPolicy policyFor(HttpServletRequest request) {
    HandlerMethod handler = handler(request);
    IdempotencyPolicy fallback = properties.isAllEndpoints() ? properties.defaultPolicy() : null;
    if (handler == null) {
      return fallback;
    }
    return byMethod
        .computeIfAbsent(handler.getMethod(), m -> Optional.ofNullable(policy(handler)))
        .orElse(fallback);
  }

  private HandlerMethod handler(HttpServletRequest request) {
    for (RequestMappingHandlerMapping mapping : mappings.orderedStream().toList()) {
      HandlerMethod h = handler(mapping, request);
      if (h != null) {
        return h;
      }
    }
    return null;
  }

  private static HandlerMethod handler(
      RequestMappingHandlerMapping mapping, HttpServletRequest request) {
    boolean parsedHere = false;
    if (mapping.getPatternParser() != null
        && !ServletRequestPathUtils.hasParsedRequestPath(request)) {
      ServletRequestPathUtils.parseAndCache(request);
      parsedHere = true;
    }
    try {
      HandlerExecutionChain chain = mapping.getHandler(request);
      return chain != null && chain.getHandler() instanceof HandlerMethod h ? h : null;
    } catch (Exception e) {
      return null; // no such handler, or not for this method: the DispatcherServlet will say so
    } finally {
      if (parsedHere) {
        ServletRequestPathUtils.clearParsedRequestPath(request);
      }
    }
  }

  /** The method's policy, or null if neither it nor its class is {@code @Idempotent}. */
  private IdempotencyPolicy policy(HandlerMethod handler) {
    Idempotent a =
        AnnotatedElementUtils.findMergedAnnotation(handler.getMethod(), Idempotent.class);
    if (a == null) {
      a = AnnotatedElementUtils.findMergedAnnotation(handler.getBeanType(), Idempotent.class);
    }
    if (a == null) {
      return null;
    }
    IdempotencyPolicy d = properties.defaultPolicy();
    return new IdempotencyPolicy(
        pick(a.keyRequired(), d.keyRequired()),
        a.waitForResult().isBlank()
            ? d.waitForResult()
            : DurationStyle.detectAndParse(a.waitForResult().strip()),
        pick(a.storeServerErrors(), d.storeServerErrors()));
  }

  private static boolean pick(Idempotent.Setting s, boolean otherwise) {
    return switch (s) {
      case YES -> true;
      case NO -> false;
      case DEFAULT -> otherwise;
    };
  }
}
