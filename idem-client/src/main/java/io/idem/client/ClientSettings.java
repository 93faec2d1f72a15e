package io.idem.client;

import java.nio.file.Path;
import java.util.List;

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
    Path identityFile,
    String name,
    IdemTransport transport,
    ClientTls tls) {}
