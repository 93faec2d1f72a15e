package io.idem.testkit.stores;

/**
 * A JVM that starts a broker, prints its PID and directory, and waits to be killed: {@link
 * KafkaBrokerTest} SIGKILLs it and checks that the broker does not outlive it.
 */
public final class KafkaBrokerOwner {
  private KafkaBrokerOwner() {}

  public static void main(String[] args) throws InterruptedException {
    KafkaBroker broker = KafkaBroker.start();
    System.out.println("broker " + broker.pid() + " " + broker.dir());
    System.out.flush();
    Thread.sleep(120_000); // bounded: the test kills this JVM long before
    broker.close();
  }
}
