"""The contract between the driver and the trial actors, beyond the actor's methods:
the marker keys a result may carry, and what ``restore`` answers when it loads nothing.

Both sides import these names from here, so neither imports the other.
"""

from __future__ import annotations

__all__ = ["CONFIG_REFUSED", "FUNCTION_DONE", "NOT_VISIBLE", "REPORTED_CHECKPOINT"]

#: A result key set by a trainable whose step reported a checkpoint of its own (a
#: function trainable's ``report(metrics, checkpoint=dir)``): the machine saves right
#: after that result, whatever ``checkpoint_every`` says. It never reaches the history.
REPORTED_CHECKPOINT = "_trialflow_checkpoint"
#: A result key that marks a pseudo-result: a function trainable's function returned.
#: The machine finishes the trial on it and records nothing of it.
FUNCTION_DONE = "_trialflow_function_done"

#: What ``TrialActor.restore`` returns when it does not see the checkpoint (the driver
#: then streams it from a node that does)...
NOT_VISIBLE = "not-visible"
#: ...and when the trainable cannot take a new config in place (a new actor is then set
#: up with it).
CONFIG_REFUSED = "config-refused"
