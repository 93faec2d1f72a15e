package io.idem.lab;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.awt.BasicStroke;
import java.awt.Color;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import org.jfree.chart.ChartFactory;
import org.jfree.chart.ChartUtils;
import org.jfree.chart.JFreeChart;
import org.jfree.chart.axis.LogAxis;
import org.jfree.chart.plot.PlotOrientation;
import org.jfree.chart.plot.XYPlot;
import org.jfree.chart.renderer.xy.XYLineAndShapeRenderer;
import org.jfree.data.xy.XYSeries;
import org.jfree.data.xy.XYSeriesCollection;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

/**
 * {@code idem bench-plot}: the table and the plot of a side-by-side sitting
 * (bench/compare-peers.sh). Reads the JSON lines that {@code idem bench} printed last in each run,
 * prints them as one Markdown table in the order they came, and draws the p99 latency of the open
 * loop runs against their rate, one line per system, to a PNG (JFreeChart).
 */
@Command(
    name = "bench-plot",
    mixinStandardHelpOptions = true,
    description =
        "Prints the runs of idem bench (their JSON lines) as one table, and plots the open-loop"
            + " runs' p99 against rate per system to a PNG.")
final class BenchPlotCommand implements Callable<Integer> {
  @Spec CommandSpec spec;

  @Parameters(
      paramLabel = "FILE",
      arity = "1..*",
      description = "Files of idem bench output; every line that is a bench's JSON counts.")
  List<Path> files;

  @Option(
      names = "--png",
      paramLabel = "FILE",
      description = "Write the plot of p99 against rate (open-loop runs) to FILE.")
  Path png;

  @Option(
      names = "--title",
      defaultValue = "p99 latency against offered rate, 3 nodes on loopback",
      description = "The plot's title. Default: ${DEFAULT-VALUE}.")
  String title;

  /** One run, as its JSON line says. */
  record Run(
      String target,
      String workload,
      double rate,
      double achieved,
      double p50,
      double p99,
      double p999,
      double max,
      boolean isShort,
      double serverCpuPerOp,
      long errors) {

    boolean open() {
      return rate > 0;
    }
  }

  @Override
  public Integer call() throws IOException {
    PrintWriter out = spec.commandLine().getOut();
    PrintWriter err = spec.commandLine().getErr();
    List<Run> runs = new ArrayList<>();
    for (Path f : files) {
      if (!Files.isRegularFile(f)) {
        err.println("idem: " + f + ": no such file");
        return 2;
      }
      runs.addAll(read(Files.readAllLines(f)));
    }
    if (runs.isEmpty()) {
      err.println("idem: no line of idem bench's JSON in " + files);
      return 2;
    }
    out.println(
        "| system | workload | loop | offered /s | achieved /s | p50 ms | p99 ms | p99.9 ms | max ms"
            + " | server CPU-µs/op |");
    out.println("|---|---|---|---|---|---|---|---|---|---|");
    for (Run r : runs) {
      out.printf(
          Locale.ROOT,
          "| %s | %s | %s | %s | %,.0f%s | %.2f | %.2f | %.2f | %.2f | %s |%n",
          r.target(),
          r.workload(),
          r.open() ? "open" : "closed",
          r.open() ? String.format(Locale.ROOT, "%,.0f", r.rate()) : "(peak)",
          r.achieved(),
          r.isShort() ? " SHORT" : r.errors() > 0 ? " (" + r.errors() + " errors)" : "",
          r.p50(),
          r.p99(),
          r.p999(),
          r.max(),
          r.serverCpuPerOp() < 0 ? "-" : String.format(Locale.ROOT, "%.1f", r.serverCpuPerOp()));
    }
    if (png != null) {
      int points = plot(runs, png, title);
      if (points == 0) {
        err.println("idem: no open-loop run (with --rate) to plot");
        return 2;
      }
      out.println("plot: " + png + " (" + points + " open-loop runs)");
    }
    return 0;
  }

  /** The runs in {@code lines}: each line that parses as idem bench's JSON of one run. */
  static List<Run> read(List<String> lines) {
    ObjectMapper json = new ObjectMapper();
    List<Run> runs = new ArrayList<>();
    for (String line : lines) {
      String t = line.trim();
      if (!t.startsWith("{\"target\"")) {
        continue;
      }
      JsonNode n;
      try {
        n = json.readTree(t);
      } catch (IOException e) {
        continue; // a line cut short (a run that was stopped)
      }
      runs.add(
          new Run(
              n.path("target").asText(),
              n.path("workload").asText(),
              n.path("rate").asDouble(0),
              n.path("ops_per_s").asDouble(),
              n.path("p50_ms").asDouble(),
              n.path("p99_ms").asDouble(),
              n.path("p999_ms").asDouble(),
              n.path("max_ms").asDouble(),
              n.path("short").asBoolean(false),
              n.path("server_cpu_us_per_op").asDouble(-1),
              n.path("errors").asLong()));
    }
    return runs;
  }

  /** Draws the open-loop runs' p99 against their offered rate; returns how many points. */
  static int plot(List<Run> runs, Path png, String title) throws IOException {
    Map<String, XYSeries> bySystem = new LinkedHashMap<>();
    int points = 0;
    List<Run> open = new ArrayList<>(runs.stream().filter(Run::open).toList());
    open.sort(Comparator.comparingDouble(Run::rate));
    for (Run r : open) {
      String name = r.target() + (r.workload().equals("put") ? "" : " " + r.workload());
      bySystem.computeIfAbsent(name, k -> new XYSeries(k, true, true)).add(r.rate(), r.p99());
      points++;
    }
    if (points == 0) {
      return 0;
    }
    XYSeriesCollection data = new XYSeriesCollection();
    bySystem.values().forEach(data::addSeries);
    JFreeChart chart =
        ChartFactory.createXYLineChart(
            null,
            "offered rate (operations/s)",
            "p99 (ms)",
            data,
            PlotOrientation.VERTICAL,
            true,
            false,
            false);
    chart.setTitle(new org.jfree.chart.title.TextTitle(title));
    XYPlot plot = chart.getXYPlot();
    LogAxis y = new LogAxis("p99 (ms), log scale");
    y.setSmallestValue(0.1);
    y.setNumberFormatOverride(new java.text.DecimalFormat("#,##0.#"));
    plot.setRangeAxis(y);
    plot.setBackgroundPaint(Color.WHITE);
    plot.setDomainGridlinePaint(Color.LIGHT_GRAY);
    plot.setRangeGridlinePaint(Color.LIGHT_GRAY);
    XYLineAndShapeRenderer renderer = new XYLineAndShapeRenderer(true, true);
    for (int i = 0; i < data.getSeriesCount(); i++) {
      renderer.setSeriesStroke(i, new BasicStroke(2f));
    }
    plot.setRenderer(renderer);
    Path dir = png.toAbsolutePath().getParent();
    if (dir != null) {
      Files.createDirectories(dir);
    }
    ChartUtils.saveChartAsPNG(png.toFile(), chart, 900, 560);
    return points;
  }
}
