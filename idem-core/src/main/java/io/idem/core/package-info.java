/**
 * The deterministic session core of Idem: the table that decides, for every command that reaches
 * the replicated log, whether it is new, a duplicate of one already applied, or to be refused.
 *
 * <p>Everything here is a pure function of its arguments and the table's state: no clock reads, no
 * randomness, no iteration order that depends on hashing. Time and identifiers are passed in by the
 * caller (the replicated state machine passes log time and log indexes), which is what lets every
 * replica reach the same state from the same log. A build check ({@code DeterminismRulesTest})
 * enforces this, and the module depends on the JDK only.
 *
 * <p>Entry point: {@link io.idem.core.SessionTable}.
 */
package io.idem.core;
