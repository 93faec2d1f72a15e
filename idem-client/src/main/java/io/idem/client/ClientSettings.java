package io.idem.client;

import java.nio.file.Path;
import java.util.List;
import org.jspecify.annotations.Nullable;

/** A client's settings, checked and fixed by {@link IdemClient.Builder#build}. */
record ClientSettings(
    List<String> servers,
    int window,
    long requestTimeoutMs,
    long sessionTtlMs,
    long keepAliveMs,
    long stallTimeoutMs,
    long probeIntervalMs,
    long rpcTimeoutMs,
    @Nullable Path identityFile,
    @Nullable String name,
    @Nullable IdemTransport transport,
    @Nullable ClientTls tls) {}
