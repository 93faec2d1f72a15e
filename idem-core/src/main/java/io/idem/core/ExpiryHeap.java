package io.idem.core;

import java.util.Arrays;

/**
 * Sessions ordered by {@link Session#heapDeadlineMs} (ties by client id): an indexed binary
 * min-heap. Each session knows its slot, so removal on close is O(log n).
 *
 * <p>Activity does not re-key the heap: a session's real deadline only moves forward, so the heap
 * key is a lower bound of it. {@link SessionTable#expire} pops the minimum while it is due; a
 * popped session that was active meanwhile is re-keyed to its real deadline and sifted down instead
 * of being removed. Each expiry therefore costs O(log n), and a live session is re-keyed at most
 * once per TTL, whatever its request rate.
 */
final class ExpiryHeap {
  private Session[] heap = new Session[16];
  private int size;

  int size() {
    return size;
  }

  /** Grows the array once so that {@code expected} sessions fit. */
  void ensureCapacity(int expected) {
    if (expected > heap.length) {
      heap = Arrays.copyOf(heap, expected);
    }
  }

  /** The session with the smallest key, or {@code null}. */
  Session peek() {
    return size == 0 ? null : heap[0];
  }

  void add(Session s) {
    if (size == heap.length) {
      heap = Arrays.copyOf(heap, size * 2);
    }
    heap[size] = s;
    s.heapIndex = size;
    size++;
    siftUp(s.heapIndex);
  }

  void remove(Session s) {
    int i = s.heapIndex;
    if (i < 0 || i >= size || heap[i] != s) {
      throw new IllegalStateException("session " + s.clientId + " is not in the expiry heap");
    }
    size--;
    Session last = heap[size];
    heap[size] = null;
    s.heapIndex = -1;
    if (i != size) {
      place(last, i);
      siftDown(i);
      siftUp(last.heapIndex);
    }
  }

  /** Re-files {@code s} under a later key. */
  void increaseKey(Session s, long deadlineMs) {
    s.heapDeadlineMs = deadlineMs;
    siftDown(s.heapIndex);
  }

  private void siftUp(int i) {
    Session s = heap[i];
    while (i > 0) {
      int parent = (i - 1) >>> 1;
      Session p = heap[parent];
      if (!less(s, p)) {
        break;
      }
      place(p, i);
      i = parent;
    }
    place(s, i);
  }

  private void siftDown(int i) {
    Session s = heap[i];
    int half = size >>> 1;
    while (i < half) {
      int child = 2 * i + 1;
      int right = child + 1;
      if (right < size && less(heap[right], heap[child])) {
        child = right;
      }
      if (!less(heap[child], s)) {
        break;
      }
      place(heap[child], i);
      i = child;
    }
    place(s, i);
  }

  private void place(Session s, int i) {
    heap[i] = s;
    s.heapIndex = i;
  }

  private static boolean less(Session a, Session b) {
    if (a.heapDeadlineMs != b.heapDeadlineMs) {
      return a.heapDeadlineMs < b.heapDeadlineMs;
    }
    return a.clientId < b.clientId;
  }
}
