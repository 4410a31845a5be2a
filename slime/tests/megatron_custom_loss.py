"""A custom loss in slime's plugin form, used by the Megatron tests: REINFORCE on log-probs
with a per-sample mean, plus a metric the test checks for."""

import torch


def custom_loss(args, batch, logits, reducer):
    loss = reducer(-batch["advantages"] * batch["log_probs"])
    return loss, {"loss/total": loss.detach(), "custom/logits_vocab": torch.tensor(float(logits.shape[-1]))}
