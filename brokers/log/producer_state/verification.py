"""What a partition leader remembers of a transaction's first batch while the coordinator is
asked about it (KIP-890 part 1, Kafka's `VerificationStateEntry`).

Owns: `VerificationState`, per producer id, the epoch and the lowest sequence of the
transactional batches that went to verification on this partition, and when it was made. While
it stands, a batch of the producer whose first sequence is above that lowest one is refused
out of order (`append_check.check_sequence`): after a retriable refusal of the transaction's
first batch (the coordinator still writing the previous transaction's markers), a later batch
of the same transaction must not be written first, or the retried first batch could never
follow it. A higher epoch restarts it. The manager drops it when a transactional batch of the
producer is written, except a transaction-version-2 marker at its epoch (the producer's next
transaction started verifying before the bumped marker arrived), and after
`producer.id.expiration.ms`. Not thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class VerificationState:
    """The epoch and lowest first sequence a producer's verifications saw on the partition."""

    epoch: int
    lowest_sequence: int
    supports_epoch_bump: bool  # a transaction-version-2 producer (Produce v12+)
    created_ms: int

    def observe(self, sequence: int, epoch: int) -> None:
        """A batch needing verification: a lower sequence at the epoch, or a higher epoch,
        moves the bound (Kafka's maybeUpdateLowestSequenceAndEpoch)."""
        if epoch == self.epoch and sequence < self.lowest_sequence:
            self.lowest_sequence = sequence
        if epoch > self.epoch:
            self.epoch = epoch
            self.lowest_sequence = sequence

    def ends_with(self, is_control: bool, producer_epoch: int) -> bool:
        """Whether a written transactional batch of the producer ends this state: any but a
        TV2 marker at the state's epoch."""
        return not (self.supports_epoch_bump and is_control and producer_epoch == self.epoch)
