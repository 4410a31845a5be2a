"""A seccomp filter that stops a command's processes from tampering with one another.

A grader that runs untrusted code (the agent's program, or a git filter/hook the agent configured)
shares its uid with that code, so by default that code may ptrace the grader, or write its memory,
and make it exit 0. With `SandboxSession.run(..., deny_ptrace=True)` bwrap loads this filter
(ptrace, process_vm_readv/writev and pidfd_getfd fail with EPERM; syscalls of a foreign ABI, e.g.
`int 0x80` from a 64-bit process, fail too) and /proc is remounted read-only (no /proc/PID/mem
writes, which need no syscall beyond open/write).
"""

from __future__ import annotations

import errno
import platform
import struct

# Classic BPF opcodes (linux/filter.h) and seccomp return values (linux/seccomp.h).
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_RET_K = 0x06
_SECCOMP_RET_ALLOW = 0x7FFF0000
_SECCOMP_RET_ERRNO = 0x00050000
_OFFSET_NR, _OFFSET_ARCH = 0, 4  # struct seccomp_data
_X32_SYSCALL_BIT = 0x40000000

# machine -> (AUDIT_ARCH_*, syscalls that reach another process's memory or fds)
_ARCHES: dict[str, tuple[int, dict[str, int]]] = {
    "x86_64": (0xC000003E, {"ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "pidfd_getfd": 438}),
    "aarch64": (0xC00000B7, {"ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "pidfd_getfd": 438}),
}


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def deny_ptrace_program(machine: str | None = None) -> bytes:
    """The compiled filter (struct sock_filter[]) for this machine, as bwrap's --seccomp reads it."""
    machine = machine or platform.machine()
    if machine not in _ARCHES:
        raise NotImplementedError(f"deny_ptrace: no seccomp filter for {machine!r}")
    audit_arch, denied = _ARCHES[machine]
    deny = _insn(_RET_K, _SECCOMP_RET_ERRNO | errno.EPERM)
    allow = _insn(_RET_K, _SECCOMP_RET_ALLOW)
    checks = [(_JGE_K, _X32_SYSCALL_BIT)] if machine == "x86_64" else []
    checks += [(_JEQ_K, nr) for nr in denied.values()]
    # Each check jumps forward to `deny` when it matches: past the later checks and `allow`.
    body = [_insn(code, k, jt=len(checks) - i) for i, (code, k) in enumerate(checks)]
    head = [
        _insn(_LD_W_ABS, _OFFSET_ARCH),
        _insn(_JEQ_K, audit_arch, jt=1, jf=0),  # a foreign ABI has other syscall numbers: deny it
        deny,
        _insn(_LD_W_ABS, _OFFSET_NR),
    ]
    return b"".join(head + body + [allow, deny])
