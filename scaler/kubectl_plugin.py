"""``kubectl scaler``: the ``kubectl-scaler`` console script, a kubectl plugin.

kubectl runs any executable named ``kubectl-<name>`` on ``PATH`` for ``kubectl <name> …`` and
passes it every argument after the name unchanged, global flags included
(kubernetes.io/docs/tasks/extend-kubectl/kubectl-plugins). So ``kubectl scaler --context prod
why NODE`` reaches this script as ``--context prod why NODE``: kubectl's connection flags
(``--context``, ``--kubeconfig``, ``-n/--namespace``) are taken from anywhere in the line and
handed to the sub-command, which is ``scaler dry-run``, ``scaler why`` or ``scaler status``.
``$KUBECONFIG`` works as with kubectl.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from scaler.errors import EXIT_BAD_INPUT

__all__ = ["COMMANDS", "main", "split_global_flags"]

COMMANDS = ("dry-run", "why", "status")
"""The sub-commands ``kubectl scaler`` offers: the read-only ones."""

_GLOBAL = {
    "--context": "--context",
    "--kubeconfig": "--kubeconfig",
    "--namespace": "--namespace",
    "-n": "--namespace",
}

USAGE = """\
kubectl scaler: scaler's read-only commands as a kubectl plugin.

  kubectl scaler dry-run [flags]      which nodes could be removed, and why the others stay
  kubectl scaler why NODE [flags]     one node's verdict, reason, blocker and what would change it
  kubectl scaler status [flags]       a running scaler's status ConfigMap and node verdicts

kubectl's --context, --kubeconfig and (status) -n/--namespace work anywhere on the line.
`kubectl scaler COMMAND --help` lists a command's flags; `kubectl scaler --version`.
"""


def split_global_flags(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """``argv`` split into (kubectl's connection flags as ``--flag=value``, the rest in order).
    ``--context X``, ``--context=X``, ``-n X``, ``-nX`` and ``--namespace X`` are recognised.

    Raises:
        ValueError: such a flag is last, without its value.
    """
    flags: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, value = arg.partition("=")
        if name in _GLOBAL and (eq or name.startswith("--") or name == "-n"):
            if not eq:
                if i + 1 >= len(argv):
                    raise ValueError(f"flag needs an argument: {arg}")
                value = argv[i + 1]
                i += 1
            flags.append(f"{_GLOBAL[name]}={value}")
        elif arg.startswith("-n") and len(arg) > 2 and not arg.startswith("--"):
            flags.append(f"--namespace={arg[2:]}")
        else:
            rest.append(arg)
        i += 1
    return flags, rest


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``kubectl-scaler``; returns the exit status (2 for bad input, one line)."""
    from scaler.cli import _version
    from scaler.cli import main as scaler_main

    args = list(sys.argv[1:] if argv is None else argv)
    try:
        flags, rest = split_global_flags(args)
    except ValueError as e:
        sys.stderr.write(f"kubectl scaler: error: {e}\n")
        return EXIT_BAD_INPUT
    if not rest:
        sys.stderr.write(USAGE)
        return EXIT_BAD_INPUT
    if rest[0] in ("-h", "--help", "help"):
        sys.stdout.write(USAGE)
        return 0
    if rest[0] == "--version":
        sys.stdout.write(f"kubectl-scaler {_version()}\n")
        return 0
    command = rest[0]
    if command not in COMMANDS:
        sys.stderr.write(
            f"kubectl scaler: error: unknown command {command!r} (one of: {', '.join(COMMANDS)})\n"
        )
        return EXIT_BAD_INPUT
    namespace = [f for f in flags if f.startswith("--namespace=")]
    if namespace and command != "status":
        sys.stderr.write(f"kubectl scaler: error: {namespace[0].split('=')[0]} applies to status only\n")
        return EXIT_BAD_INPUT
    return scaler_main([command, *rest[1:], *flags])


if __name__ == "__main__":
    sys.exit(main())
