package io.idem.server;

import static org.assertj.core.api.Assertions.assertThat;

import io.idem.proto.Command;
import io.idem.proto.CommandResult;
import io.idem.proto.EntryResult;
import io.idem.proto.GetKeyReply;
import io.idem.proto.GetKeyRequest;
import io.idem.proto.GetReply;
import io.idem.proto.KeepAliveCmd;
import io.idem.proto.LogEntry;
import io.idem.proto.Result;
import io.idem.proto.ServerFrame;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The leader's group commit, against a log the test drives by hand: entries are appended when the
 * test says they may be, and answered when the test answers them.
 */
@Timeout(30)
class BatcherTest {

  /** A log whose appends wait until the test answers them. */
  static final class HandLog implements ReplicatedLog {
    record Appended(LogEntry entry, CompletableFuture<EntryResult> result) {
      /** Answers every command with a frame whose seq is the command's client id. */
      void answer() {
        EntryResult.Builder r = EntryResult.newBuilder();
        for (Command c : entry.getCommandsList()) {
          r.addResults(
              CommandResult.newBuilder()
                  .setFrame(
                      ServerFrame.newBuilder()
                          .setSeq(c.getKeepAlive().getClientId())
                          .setResult(Result.getDefaultInstance())));
        }
        result.complete(r.build());
      }
    }

    final BlockingQueue<Appended> appended = new LinkedBlockingQueue<>();
    volatile boolean leader = true;

    @Override
    public CompletableFuture<EntryResult> append(LogEntry entry) {
      CompletableFuture<EntryResult> f = new CompletableFuture<>();
      appended.add(new Appended(entry, f));
      return f;
    }

    @Override
    public CompletableFuture<GetReply> read(String key, String principal) {
      throw new AssertionError("the batcher never reads");
    }

    @Override
    public CompletableFuture<GetKeyReply> readKey(GetKeyRequest request, String principal) {
      throw new AssertionError("the batcher never reads");
    }

    @Override
    public boolean isLeader() {
      return leader;
    }

    @Override
    public boolean isLeaderReady() {
      return leader;
    }

    @Override
    public String leaderClientAddress() {
      return "";
    }

    Appended next() throws InterruptedException {
      Appended a = appended.poll(10, TimeUnit.SECONDS);
      assertThat(a).as("an entry appended within 10 s").isNotNull();
      return a;
    }
  }

  final HandLog log = new HandLog();
  final AtomicLong clock = new AtomicLong(1_000);
  final List<Batcher> batchers = new ArrayList<>();

  Batcher batcher(int maxCommands, int maxBytes, int maxQueued, long tickMs) {
    return batcher(maxCommands, maxBytes, maxQueued, tickMs, () -> null);
  }

  Batcher batcher(
      int maxCommands, int maxBytes, int maxQueued, long tickMs, Supplier<Command> bootstrap) {
    return batcher(maxCommands, maxBytes, maxQueued, Long.MAX_VALUE, tickMs, bootstrap);
  }

  Batcher batcher(
      int maxCommands,
      int maxBytes,
      int maxQueued,
      long maxQueuedBytes,
      long tickMs,
      Supplier<Command> bootstrap) {
    Batcher b =
        new Batcher(
            log,
            new Batcher.Settings(maxCommands, maxBytes, 1, maxQueued, maxQueuedBytes, tickMs),
            clock::get,
            bootstrap,
            "test-batcher");
    batchers.add(b);
    return b;
  }

  @AfterEach
  void close() {
    batchers.forEach(Batcher::close);
  }

  static Command cmd(long id) {
    return Command.newBuilder().setKeepAlive(KeepAliveCmd.newBuilder().setClientId(id)).build();
  }

  static List<Long> ids(LogEntry e) {
    List<Long> out = new ArrayList<>();
    e.getCommandsList().forEach(c -> out.add(c.getKeepAlive().getClientId()));
    return out;
  }

  @Test
  void commandsThatArriveWhileAnEntryReplicatesLeaveTogetherInTheNext() throws Exception {
    Batcher b = batcher(4096, 1 << 20, 1000, 60_000);
    CompletableFuture<CommandResult> first = b.submit(cmd(1));
    HandLog.Appended e1 = log.next();
    assertThat(ids(e1.entry())).containsExactly(1L);
    List<CompletableFuture<CommandResult>> later = new ArrayList<>();
    for (long id = 2; id <= 5; id++) {
      later.add(b.submit(cmd(id)));
    }
    assertThat(log.appended.poll(200, TimeUnit.MILLISECONDS))
        .as("nothing more while one entry is in flight")
        .isNull();
    e1.answer();
    assertThat(first.get(10, TimeUnit.SECONDS).getFrame().getSeq()).isEqualTo(1);
    HandLog.Appended e2 = log.next();
    assertThat(ids(e2.entry())).containsExactly(2L, 3L, 4L, 5L);
    e2.answer();
    for (int i = 0; i < later.size(); i++) {
      assertThat(later.get(i).get(10, TimeUnit.SECONDS).getFrame().getSeq()).isEqualTo(i + 2);
    }
    assertThat(b.entriesAppended()).isEqualTo(2);
    assertThat(b.commandsAppended()).isEqualTo(5);
  }

  @Test
  void theAnswersOfAnEntryAreHandedOutInOneRoundThatClosesAfterTheLast() throws Exception {
    Batcher b = batcher(4096, 1 << 20, 1000, 60_000);
    CompletableFuture<CommandResult> first = b.submit(cmd(1));
    HandLog.Appended e1 = log.next();
    List<String> seen = java.util.Collections.synchronizedList(new ArrayList<>());
    List<CompletableFuture<CommandResult>> later = new ArrayList<>();
    for (long id = 2; id <= 4; id++) {
      CompletableFuture<CommandResult> f = b.submit(cmd(id));
      long me = id;
      // What a session stream does with an answer: keep it if a round is open on this thread.
      f.whenComplete(
          (r, e) -> {
            boolean joined = AnswerRound.join(() -> seen.add("flush " + me));
            seen.add("answer " + me + (joined ? " kept" : " alone"));
          });
      later.add(f);
    }
    e1.answer();
    first.get(10, TimeUnit.SECONDS);
    log.next().answer();
    // Waits on what the callbacks saw, not on their futures: a thread that waits in get() may run
    // a future's callbacks itself, outside the replies thread and its round.
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (seen.size() < 6 && System.nanoTime() < deadline) {
      Thread.sleep(5);
    }
    // The round closes after the last answer of the entry, then flushes in the order joined.
    assertThat(seen)
        .containsExactly(
            "answer 2 kept", "answer 3 kept", "answer 4 kept", "flush 2", "flush 3", "flush 4");
    assertThat(later).allMatch(CompletableFuture::isDone);
    assertThat(AnswerRound.join(() -> {})).as("no round open on the test's thread").isFalse();
  }

  @Test
  void aReadBarrierWaitsForAnEntryAppendedAfterIt() throws Exception {
    Batcher b = batcher(4096, 1 << 20, 1000, 60_000);
    b.submit(cmd(1));
    HandLog.Appended e1 = log.next(); // in flight before the barrier: it must not count
    CompletableFuture<Void> barrier = b.barrier();
    e1.answer();
    HandLog.Appended e2 = log.next(); // no command waits: the barrier's own, empty entry
    assertThat(e2.entry().getCommandsList()).isEmpty();
    assertThat(barrier).as("open until the entry after it is applied").isNotDone();
    CompletableFuture<Void> later = b.barrier(); // arrives while e2 is in flight
    CompletableFuture<CommandResult> rider = b.submit(cmd(3));
    e2.answer();
    barrier.get(10, TimeUnit.SECONDS);
    assertThat(later).as("e2 left before it: it waits for the next entry").isNotDone();
    HandLog.Appended e3 = log.next();
    assertThat(ids(e3.entry())).containsExactly(3L); // a barrier rides with the commands
    e3.answer();
    later.get(10, TimeUnit.SECONDS);
    assertThat(rider.get(10, TimeUnit.SECONDS).getFrame().getSeq()).isEqualTo(3);

    CompletableFuture<Void> refused = b.barrier();
    log.next().result().completeExceptionally(new ReplicatedLog.NotLeaderException("elsewhere"));
    assertThat(waitFailure(refused)).isInstanceOf(ReplicatedLog.NotLeaderException.class);
    b.submit(cmd(4));
    log.next(); // in flight, never answered: the next barrier waits in the batcher
    CompletableFuture<Void> atClose = b.barrier();
    b.close();
    assertThat(waitFailure(atClose)).isInstanceOf(ReplicatedLog.NotLeaderException.class);
  }

  @Test
  void anEntryHoldsAtMostMaxCommandsAndMaxBytesButAnOversizedCommandStillGoesAlone()
      throws Exception {
    int size = cmd(7).getSerializedSize();
    Batcher b = batcher(2, size * 3, 1000, 60_000);
    b.submit(cmd(1));
    HandLog.Appended e1 = log.next();
    for (long id = 2; id <= 6; id++) {
      b.submit(cmd(id));
    }
    e1.answer();
    HandLog.Appended e2 = log.next();
    assertThat(ids(e2.entry())).containsExactly(2L, 3L);
    e2.answer();
    HandLog.Appended e3 = log.next();
    assertThat(ids(e3.entry())).containsExactly(4L, 5L);
    e3.answer();
    assertThat(ids(log.next().entry())).containsExactly(6L);

    Batcher tight = batcher(100, 1, 1000, 60_000); // every command is over the byte bound
    log.appended.clear();
    tight.submit(cmd(8));
    assertThat(ids(log.next().entry())).containsExactly(8L);
  }

  @Test
  void stampsAreTheWallClockAsItIsEvenWhenItStepsBack() throws Exception {
    Batcher b = batcher(4096, 1 << 20, 1000, 60_000);
    b.submit(cmd(1));
    HandLog.Appended e1 = log.next();
    assertThat(e1.entry().getLeaderTimeMs()).isEqualTo(1_000);
    assertThat(e1.entry().getFormatVersion()).isEqualTo(ReplicatedState.LOG_FORMAT_VERSION);
    clock.set(900); // the wall clock stepped back: replicas keep log time at 1,000 (they take the
    // highest stamp), and a stamp carried ahead of the clock would be refused as a proposal
    b.submit(cmd(2));
    e1.answer();
    HandLog.Appended e2 = log.next();
    assertThat(e2.entry().getLeaderTimeMs()).isEqualTo(900);
    clock.set(1_500);
    b.submit(cmd(3));
    e2.answer();
    assertThat(log.next().entry().getLeaderTimeMs()).isEqualTo(1_500);
  }

  @Test
  void beyondMaxQueuedACommandIsRefusedAsOverloaded() throws Exception {
    Batcher b = batcher(4096, 1 << 20, 3, 60_000);
    b.submit(cmd(1));
    HandLog.Appended e1 = log.next(); // in flight: what follows queues
    List<CompletableFuture<CommandResult>> queued = new ArrayList<>();
    for (long id = 2; id <= 4; id++) {
      queued.add(b.submit(cmd(id)));
    }
    CompletableFuture<CommandResult> refused = b.submit(cmd(5));
    assertThat(refused).isCompletedExceptionally();
    assertThat(failure(refused)).isInstanceOf(Batcher.OverloadedException.class);
    e1.answer();
    log.next().answer();
    for (CompletableFuture<CommandResult> f : queued) {
      assertThat(f.get(10, TimeUnit.SECONDS)).isNotNull();
    }
  }

  @Test
  void beyondMaxQueuedBytesACommandIsRefusedAsOverloadedButAnEmptyQueueTakesAnySize()
      throws Exception {
    int size = cmd(2).getSerializedSize();
    Batcher b = batcher(4096, 1 << 20, 100, 3L * size, 60_000, () -> null);
    b.submit(cmd(1));
    HandLog.Appended e1 = log.next(); // in flight: what follows queues
    List<CompletableFuture<CommandResult>> queued = new ArrayList<>();
    for (long id = 2; id <= 4; id++) {
      queued.add(b.submit(cmd(id))); // exactly at the bound
    }
    assertThat(queued).noneMatch(CompletableFuture::isDone);
    CompletableFuture<CommandResult> refused = b.submit(cmd(5));
    assertThat(failure(refused))
        .isInstanceOf(Batcher.OverloadedException.class)
        .hasMessageContaining("(" + 3 * size + " bytes)");
    e1.answer();
    HandLog.Appended e2 = log.next();
    assertThat(ids(e2.entry())).containsExactly(2L, 3L, 4L);
    e2.answer();
    for (CompletableFuture<CommandResult> f : queued) {
      assertThat(f.get(10, TimeUnit.SECONDS)).isNotNull();
    }

    Batcher tiny = batcher(4096, 1 << 20, 100, 1, 60_000, () -> null);
    CompletableFuture<CommandResult> alone = tiny.submit(cmd(6));
    log.next().answer();
    assertThat(alone.get(10, TimeUnit.SECONDS))
        .as("larger than the bound, into an empty queue")
        .isNotNull();
  }

  @Test
  void aBatchQueuesInOrderUntilTheQueueIsFullAndTheRestIsRefusedAsOverloaded() throws Exception {
    Batcher b = batcher(4096, 1 << 20, 3, 60_000);
    b.submit(cmd(1));
    HandLog.Appended e1 = log.next(); // in flight: what follows queues
    List<CompletableFuture<CommandResult>> all =
        b.submitAll(List.of(cmd(2), cmd(3), cmd(4), cmd(5), cmd(6)));
    assertThat(all).hasSize(5);
    assertThat(all.subList(0, 3)).noneMatch(CompletableFuture::isDone);
    assertThat(all.subList(3, 5)).allMatch(CompletableFuture::isCompletedExceptionally);
    assertThat(failure(all.get(3))).isInstanceOf(Batcher.OverloadedException.class);
    e1.answer();
    HandLog.Appended e2 = log.next();
    assertThat(ids(e2.entry())).containsExactly(2L, 3L, 4L);
    e2.answer();
    for (int i = 0; i < 3; i++) {
      assertThat(all.get(i).get(10, TimeUnit.SECONDS).getFrame().getSeq()).isEqualTo(i + 2);
    }
  }

  @Test
  void aFailedEntryFailsEachOfItsCommandsAndAShortAnswerToo() throws Exception {
    Batcher b = batcher(4096, 1 << 20, 1000, 60_000);
    CompletableFuture<CommandResult> a = b.submit(cmd(1));
    log.next().result().completeExceptionally(new ReplicatedLog.NotLeaderException("x:1"));
    assertThat(waitFailure(a)).isInstanceOf(ReplicatedLog.NotLeaderException.class);

    CompletableFuture<CommandResult> c = b.submit(cmd(2));
    log.next().result().complete(EntryResult.getDefaultInstance()); // no answer for the command
    assertThat(waitFailure(c))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("0 of 1");
  }

  @Test
  void anIdleLeaderAppendsTicksAndAnIdleFollowerDoesNot() throws Exception {
    log.leader = false;
    batcher(4096, 1 << 20, 1000, 20);
    assertThat(log.appended.poll(300, TimeUnit.MILLISECONDS))
        .as("no tick from a follower in 15 tick intervals")
        .isNull();
    log.leader = true;
    HandLog.Appended tick = log.next();
    assertThat(tick.entry().getCommandsCount()).isZero();
  }

  @Test
  void aBootstrapConfigurationGoesFirstInAnEntryAheadOfTheQueuedCommands() throws Exception {
    Command boot = cmd(99);
    Batcher b = batcher(4096, 1 << 20, 1000, 60_000, () -> boot);
    CompletableFuture<CommandResult> a = b.submit(cmd(1));
    HandLog.Appended e = log.next();
    assertThat(ids(e.entry())).containsExactly(99L, 1L);
    e.answer();
    assertThat(a.get(10, TimeUnit.SECONDS).getFrame().getSeq()).isEqualTo(1);
  }

  @Test
  void closingFailsWhatIsQueuedAsNotLeader() throws Exception {
    Batcher b = batcher(4096, 1 << 20, 1000, 60_000);
    b.submit(cmd(1));
    log.next();
    CompletableFuture<CommandResult> queued = b.submit(cmd(2));
    b.close();
    assertThat(waitFailure(queued)).isInstanceOf(ReplicatedLog.NotLeaderException.class);
    assertThat(failure(b.submit(cmd(3)))).isInstanceOf(ReplicatedLog.NotLeaderException.class);
  }

  static Throwable failure(CompletableFuture<?> f) {
    assertThat(f).isCompletedExceptionally();
    return waitFailure(f);
  }

  static Throwable waitFailure(CompletableFuture<?> f) {
    try {
      f.orTimeout(10, TimeUnit.SECONDS).join();
      throw new AssertionError("did not fail");
    } catch (CompletionException e) {
      return e.getCause();
    }
  }
}
