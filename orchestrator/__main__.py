"""``python -m orchestrator``: see :mod:`orchestrator.cli`.

Ctrl-C is answered before the command line's modules are imported: a process that
inherited SIGINT ignored (a shell's background job) or blocked (a child of Ray's
processes) would otherwise lose a Ctrl-C that arrives while they load.
"""

import sys

if __name__ == "__main__":
    from orchestrator.ctrl_c import answer_ctrl_c

    try:
        answer_ctrl_c()
        from orchestrator.cli import main
    except KeyboardInterrupt:
        print("trialflow: interrupted", file=sys.stderr)
        sys.exit(130)
    sys.exit(main())
