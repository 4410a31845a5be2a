"""Unit checks of the method plugins: top-k distillation loss (reverse KL over top-k + tail bin) and combine advantages."""

from __future__ import annotations

import torch
from slime.utils.plugins import load_plugin_module

from openclaw.bridge.teacher import teacher_messages

# Method folders are plugin folders: their modules are loaded the way the trainer loads them.
topk = load_plugin_module("openclaw-opd/topk_distillation_loss.py")
combine_loss = load_plugin_module("openclaw-combine/combine_loss.py")


def test_zero_when_student_is_teacher_and_positive_otherwise() -> None:
    torch.manual_seed(0)
    logits = torch.randn(5, 50)
    student = torch.log_softmax(logits, -1)
    top, ids = student.topk(4, dim=-1)
    kl_same = topk.bin_reverse_kl(student, ids, top)
    assert torch.allclose(kl_same, torch.zeros(5), atol=1e-5)
    other = torch.log_softmax(logits + torch.randn(5, 50), -1)
    kl = topk.bin_reverse_kl(other, ids, top)
    assert torch.all(kl > 0)


def test_gradient_moves_student_towards_teacher() -> None:
    torch.manual_seed(1)
    teacher = torch.log_softmax(torch.randn(3, 20) * 3, -1)
    top, ids = teacher.topk(5, dim=-1)
    logits = torch.zeros(3, 20, requires_grad=True)
    opt = torch.optim.SGD([logits], lr=1.0)
    first = None
    for _ in range(50):
        loss = topk.bin_reverse_kl(torch.log_softmax(logits, -1), ids, top).mean()
        first = first if first is not None else float(loss)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert float(loss) < 0.1 * first


def test_tail_bin_is_the_remaining_mass() -> None:
    lp = torch.log(torch.tensor([[0.5, 0.2, 0.1]]))
    assert torch.allclose(topk.tail_log_prob(lp).exp(), torch.tensor([0.2]), atol=1e-6)


def test_combine_mixing_rules_on_advantages() -> None:
    """w_opd·(teacher − old) + w_rl·reward: score-only rows get no OPD term (teacher = behaviour),
    hint-only rows (reward 0) only the OPD term, padding stays 0."""
    old = torch.tensor([[-1.0, -2.0, -0.5], [-1.0, -2.0, 0.0], [-0.3, -0.2, -0.1]])
    teacher = torch.tensor([[-1.0, -2.0, -0.5], [-0.5, -3.0, 0.0], [-0.1, -0.4, -0.1]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    rewards = torch.tensor([1.0, 0.0, -1.0])  # score only, hint only, hint and score
    total, opd, rl = combine_loss.combine_advantages(rewards, teacher, old, mask, w_opd=2.0, w_rl=0.5)
    assert torch.all(opd[0] == 0) and torch.allclose(total[0], torch.full((3,), 0.5))
    assert torch.all(rl[1] == 0) and torch.allclose(total[1], torch.tensor([1.0, -2.0, 0.0]))
    assert torch.allclose(total[2], torch.tensor([0.4 - 0.5, -0.4 - 0.5, 0.0 - 0.5]))


def test_opd_teacher_sees_the_hint_before_the_question() -> None:
    """The hint goes in front of the last user message (after it, a small model answers the hint);
    earlier messages are untouched and the caller's list is not modified."""
    messages = [{"role": "system", "content": "Be helpful."}, {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "What is a calorie?"}]
    out = teacher_messages(messages, "Keep it short.")
    assert out[-1]["content"] == "Keep it short.\n\nWhat is a calorie?"
    assert out[:3] == messages[:3] and messages[-1]["content"] == "What is a calorie?"
    tool_turn = [{"role": "assistant", "content": "", "tool_calls": []}, {"role": "tool", "content": "error"}]
    assert teacher_messages(tool_turn, "The command failed.")[-1] == {"role": "user", "content": "The command failed."}
