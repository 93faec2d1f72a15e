package io.idem.lab;

import static org.assertj.core.api.Assertions.assertThat;

import io.idem.cli.Idem;
import io.idem.testkit.LocalCluster;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * The shell blocks of README.md and docs/*.md that are marked as executable. A marker is an HTML
 * comment on the line before the fence:
 *
 * <ul>
 *   <li>{@code <!-- doc-test: run -->}: the block runs with bash against a 3-node {@link
 *       LocalCluster} ({@code IDEM_SERVERS} names it), in a temporary directory, where {@code
 *       idem}, {@code ./idem} and {@code bin/idem} run the lab's main class on this test's class
 *       path. It must exit 0. Each call gets {@code --timeout 60s} appended (so a run block holds
 *       client commands only): the commands' 5 s default is too short for a JVM that starts beside
 *       a build on a loaded machine. The parse check sees the call as the block wrote it.
 *   <li>{@code <!-- doc-test: parse -->}: the block needs more than a test has (a build, systemd,
 *       several machines, minutes of load). It must pass {@code bash -n}, and every {@code idem},
 *       {@code ./idem} or {@code bin/idem} command line in it (with the block's variables expanded)
 *       must parse against the real command tree: the lab's for {@code ./idem}, the operator tool's
 *       for {@code idem} and {@code bin/idem}.
 * </ul>
 *
 * A renamed command or flag, a flag moved to another command or a value that no longer converts
 * fails the build. Unmarked shell blocks are allowed; the test prints them.
 */
@Timeout(value = 20, unit = TimeUnit.MINUTES)
class ExecutableDocsTest {
  private static final Pattern MARKER =
      Pattern.compile("^\\s*<!--\\s*doc-test:\\s*(\\S+)\\s*-->\\s*$");
  private static final Pattern FENCE = Pattern.compile("^(\\s*)```\\s*(\\S*)\\s*$");
  private static final List<String> SHELL = List.of("", "sh", "bash", "shell", "console");

  /** An assignment alone on its line, such as {@code PEERS=...} or {@code TLS="..."}. */
  private static final Pattern ASSIGNMENT =
      Pattern.compile("^[A-Za-z_][A-Za-z0-9_]*=(\"[^\"]*\"|'[^']*'|[^\\s\"'`$;|&()]*)\\s*(#.*)?$");

  /** A command line that runs one of the tools, after optional environment assignments. */
  private static final Pattern INVOCATION =
      Pattern.compile("^([A-Za-z_][A-Za-z0-9_]*=\\S*\\s+)*(idem|\\./idem|bin/idem)(\\s.*)?$");

  private static final Duration BLOCK_TIMEOUT = Duration.ofMinutes(5);

  /** The deadline given to each call of a run block, in place of the commands' 5 s default. */
  private static final String CALL_TIMEOUT = "60s";

  @TempDir Path dir;

  /** One fenced block of a Markdown file. */
  record Block(Path file, int line, String mode, String language, String text) {
    String where() {
      return file.getFileName() + ":" + line;
    }

    boolean isShell() {
      return SHELL.contains(language);
    }
  }

  /** The command lines a block runs, recorded by the shell functions that stand for the tools. */
  record Invocation(Block block, String tool, List<String> args) {
    @Override
    public String toString() {
      return block.where() + ": " + (tool.equals("lab") ? "./idem" : "idem") + " " + args;
    }
  }

  @Test
  void everyMarkerPrecedesAShellBlockAndTheUnmarkedOnesAreListed() throws IOException {
    List<Block> blocks = blocks(root());
    List<String> unmarked = new ArrayList<>();
    for (Block b : blocks) {
      if (b.mode() == null && b.isShell()) {
        unmarked.add(b.where() + "  " + firstLine(b.text()));
      }
    }
    System.out.println(
        "Unmarked shell blocks (" + unmarked.size() + "):\n  " + String.join("\n  ", unmarked));
    assertThat(blocks.stream().filter(b -> "run".equals(b.mode()))).isNotEmpty();
    assertThat(blocks.stream().filter(b -> "parse".equals(b.mode()))).isNotEmpty();
  }

  @Test
  void parseBlocksNameRealCommandsAndFlags() throws Exception {
    List<String> problems = new ArrayList<>();
    int checked = 0;
    for (Block b : blocks(root())) {
      if (!"parse".equals(b.mode())) {
        continue;
      }
      problems.addAll(syntax(b));
      List<Invocation> calls = recordInvocations(b);
      checked += calls.size();
      for (Invocation call : calls) {
        String problem = parse(call);
        if (problem != null) {
          problems.add(call + ": " + problem);
        }
      }
    }
    assertThat(problems).as("problems in the docs' parse blocks").isEmpty();
    assertThat(checked).as("command lines checked").isPositive();
  }

  @Test
  void runBlocksRunAgainstALocalCluster() throws Exception {
    List<Block> runs = blocks(root()).stream().filter(b -> "run".equals(b.mode())).toList();
    assertThat(runs).isNotEmpty();
    try (LocalCluster cluster = LocalCluster.start(3, dir.resolve("cluster"))) {
      cluster.waitForLeader(Duration.ofSeconds(60));
      String servers = String.join(",", cluster.clientAddresses());
      List<String> problems = new ArrayList<>();
      for (Block b : runs) {
        problems.addAll(syntax(b));
        Path work =
            Files.createDirectories(dir.resolve("run-" + b.file().getFileName() + "-" + b.line()));
        Path calls = Files.createDirectories(work.resolve(".calls"));
        Result r = bash(work, runScript(b, calls), servers);
        for (Invocation call : invocationsIn(b, calls)) {
          String problem = parse(call);
          if (problem != null) {
            problems.add(call + ": " + problem);
          }
        }
        if (r.exit != 0) {
          problems.add(b.where() + " exited " + r.exit + "\n--- output ---\n" + r.output);
        }
      }
      assertThat(problems).as("problems in the docs' run blocks").isEmpty();
    }
  }

  /** The problem {@code bash -n} finds in a block, if any. */
  private List<String> syntax(Block b) throws Exception {
    Path script = Files.writeString(dir.resolve("syntax.sh"), b.text());
    Result r = run(dir, List.of("bash", "-n", script.toString()), "");
    return r.exit == 0 ? List.of() : List.of(b.where() + ": bash -n: " + r.output.strip());
  }

  /** Runs a parse block's tool invocations (and its variables) with the tools stubbed out. */
  private List<Invocation> recordInvocations(Block b) throws Exception {
    Path calls =
        Files.createDirectories(dir.resolve("calls-" + b.file().getFileName() + "-" + b.line()));
    StringBuilder script = new StringBuilder(recorder(calls));
    for (String line : logicalLines(b.text())) {
      String l = line.strip();
      if (ASSIGNMENT.matcher(l).matches() || INVOCATION.matcher(l).matches()) {
        script.append(l.replaceAll("\\s&\\s*(#.*)?$", "")).append('\n');
      }
    }
    script.append("\ntrue\n");
    Result r = bash(dir, script.toString(), "");
    assertThat(r.exit).as(b.where() + " as recorded:\n" + r.output).isZero();
    return invocationsIn(b, calls);
  }

  /** Shell functions that record each tool invocation's arguments, one NUL-separated file each. */
  private static String recorder(Path calls) {
    return save(calls)
        + "__rec() { __save \"$@\"; }\n"
        + "idem() { __rec cli \"$@\"; }\n"
        + "function ./idem { __rec lab \"$@\"; }\n"
        + "function bin/idem { __rec cli \"$@\"; }\n";
  }

  /**
   * A shell function {@code __save TOOL ARGS...} that writes ARGS, NUL-terminated, to a file of its
   * own in {@code calls}, named so that the files sort in call order (a call in a command
   * substitution runs in a subshell, hence the pid).
   */
  private static String save(Path calls) {
    return "__n=0\n"
        + "__save() { __n=$((__n+1)); local t=$1; shift;"
        + " local f='"
        + calls
        + "'/$(printf %05d $__n)-$BASHPID.$t; : > \"$f\";"
        + " if [ $# -gt 0 ]; then printf '%s\\0' \"$@\" > \"$f\"; fi; }\n";
  }

  /** A run block with the tools bound to this class path; each call is recorded, then run. */
  private static String runScript(Block b, Path calls) {
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    return "set -euo pipefail\n"
        + save(calls)
        + "__run() { __save \"$@\"; shift; '"
        + java
        + "' -cp \"$DOC_TEST_CP\" io.idem.lab.IdemLab \"$@\" --timeout "
        + CALL_TIMEOUT
        + "; }\n"
        + "idem() { __run cli \"$@\"; }\n"
        + "function ./idem { __run lab \"$@\"; }\n"
        + "function bin/idem { __run cli \"$@\"; }\n"
        + b.text()
        + "\n";
  }

  private static List<Invocation> invocationsIn(Block b, Path calls) throws IOException {
    List<Invocation> out = new ArrayList<>();
    try (Stream<Path> files = Files.list(calls)) {
      for (Path f : files.sorted().toList()) {
        String name = f.getFileName().toString();
        String tool = name.substring(name.lastIndexOf('.') + 1);
        String content = Files.readString(f, StandardCharsets.UTF_8);
        List<String> args =
            content.isEmpty()
                ? List.of()
                : Arrays.asList(content.substring(0, content.length() - 1).split("\0", -1));
        out.add(new Invocation(b, tool, args));
      }
    }
    return out;
  }

  /** Why {@code call} does not parse against its tool's command tree, or null if it does. */
  private static String parse(Invocation call) {
    PrintWriter sink = new PrintWriter(new StringWriter());
    CommandLine cli =
        call.tool().equals("lab") ? IdemLab.commandLine(sink, sink) : Idem.commandLine(sink, sink);
    // A parse block is checked for its commands and flags. The server's default provider reads the
    // file --config names, which exists only on the machine the block describes (an installation).
    cli.getSubcommands().get("server").setDefaultValueProvider(null);
    try {
      CommandLine.ParseResult p = cli.parseArgs(call.args().toArray(String[]::new));
      for (; p != null; p = p.subcommand()) {
        if (!p.unmatched().isEmpty()) {
          return "unmatched " + p.unmatched();
        }
      }
      return null;
    } catch (CommandLine.ParameterException e) {
      return e.getMessage();
    }
  }

  /** Every fenced block of README.md and docs/*.md, with its marker's mode (null if unmarked). */
  static List<Block> blocks(Path root) throws IOException {
    List<Path> files = new ArrayList<>();
    files.add(root.resolve("README.md"));
    try (Stream<Path> docs = Files.list(root.resolve("docs"))) {
      docs.filter(p -> p.toString().endsWith(".md")).sorted().forEach(files::add);
    }
    List<Block> blocks = new ArrayList<>();
    for (Path f : files) {
      List<String> lines = Files.readAllLines(f, StandardCharsets.UTF_8);
      for (int i = 0; i < lines.size(); i++) {
        Matcher m = MARKER.matcher(lines.get(i));
        if (m.matches()) {
          String mode = m.group(1);
          if (!mode.equals("run") && !mode.equals("parse")) {
            throw new AssertionError(
                f.getFileName() + ":" + (i + 1) + ": unknown doc-test mode " + mode);
          }
          if (i + 1 >= lines.size() || !FENCE.matcher(lines.get(i + 1)).matches()) {
            throw new AssertionError(
                f.getFileName() + ":" + (i + 1) + ": a doc-test marker must precede a fence");
          }
          continue;
        }
        Matcher fence = FENCE.matcher(lines.get(i));
        if (!fence.matches()) {
          continue;
        }
        String indent = fence.group(1);
        int end = i + 1;
        while (end < lines.size() && !lines.get(end).strip().equals("```")) {
          end++;
        }
        if (end >= lines.size()) {
          throw new AssertionError(f.getFileName() + ":" + (i + 1) + ": unclosed fence");
        }
        String text =
            lines.subList(i + 1, end).stream()
                .map(l -> l.startsWith(indent) ? l.substring(indent.length()) : l)
                .collect(Collectors.joining("\n"));
        Matcher marker = i > 0 ? MARKER.matcher(lines.get(i - 1)) : null;
        String mode = marker != null && marker.matches() ? marker.group(1) : null;
        Block b = new Block(f, i + 1, mode, fence.group(2), text);
        if (mode != null && !b.isShell()) {
          throw new AssertionError(b.where() + ": a doc-test block must be a shell block");
        }
        blocks.add(b);
        i = end;
      }
    }
    return blocks;
  }

  /** Lines with their backslash continuations joined. */
  private static List<String> logicalLines(String text) {
    List<String> out = new ArrayList<>();
    StringBuilder current = new StringBuilder();
    for (String line : text.split("\n", -1)) {
      if (line.endsWith("\\")) {
        current.append(line, 0, line.length() - 1).append(' ');
      } else {
        out.add(current.append(line).toString());
        current.setLength(0);
      }
    }
    return out;
  }

  private static String firstLine(String text) {
    String first = text.split("\n", 2)[0];
    return first.length() > 80 ? first.substring(0, 80) + "..." : first;
  }

  /** The repository's root: the nearest directory up from here with README.md and docs/. */
  private static Path root() {
    for (Path p = Path.of("").toAbsolutePath(); p != null; p = p.getParent()) {
      if (Files.isRegularFile(p.resolve("README.md")) && Files.isDirectory(p.resolve("docs"))) {
        return p;
      }
    }
    throw new AssertionError("no README.md and docs/ above " + Path.of("").toAbsolutePath());
  }

  private record Result(int exit, String output) {}

  private Result bash(Path workDir, String script, String servers) throws Exception {
    Path file = Files.writeString(workDir.resolve(".doc-test.sh"), script);
    return run(workDir, List.of("bash", file.toString()), servers);
  }

  private static Result run(Path workDir, List<String> command, String servers) throws Exception {
    ProcessBuilder pb =
        new ProcessBuilder(command).directory(workDir.toFile()).redirectErrorStream(true);
    pb.environment().put("IDEM_SERVERS", servers);
    pb.environment().put("DOC_TEST_CP", System.getProperty("java.class.path"));
    pb.environment().remove("IDEM_JAVA_OPTS");
    Path log = Files.createTempFile(workDir, "out", ".log");
    pb.redirectOutput(log.toFile());
    Process p = pb.start();
    if (!p.waitFor(BLOCK_TIMEOUT.toSeconds(), TimeUnit.SECONDS)) {
      p.descendants().forEach(ProcessHandle::destroyForcibly);
      p.destroyForcibly().waitFor();
      return new Result(-1, "timed out after " + BLOCK_TIMEOUT + "\n" + Files.readString(log));
    }
    return new Result(p.exitValue(), Files.readString(log));
  }
}
