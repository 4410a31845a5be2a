"""openclaw-opd's top-k distillation loss: reverse KL over the teacher's top-k plus a tail bin."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.append(str(Path(__file__).resolve().parents[1] / "openclaw-opd"))

import topk_distillation_loss as topk  # noqa: E402


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
