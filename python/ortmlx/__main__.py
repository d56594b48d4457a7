"""python -m ortmlx {demo,info,options,doctor,run}"""

from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ortmlx")
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("info", help="library path, version, EP devices")
    demo = sub.add_parser("demo", help="run the embedded demo model on MLX and on ORT CPU")
    demo.add_argument("--seed", type=int, default=0)
    sub.add_parser("options", help="provider options and environment variables of the EP")
    from ortmlx import cli

    cli.add_subcommands(sub)
    args = parser.parse_args(argv)
    if args.cmd in ("doctor", "run"):
        return cli.dispatch(args)
    if args.cmd == "info":
        import ortmlx

        print("ep:", ortmlx.ep_name(), "version:", ortmlx.version())
        print("library:", ortmlx.library_path())
        print("devices:", [(d.ep_name, d.ep_vendor) for d in ortmlx.ep_devices()])
        return 0
    if args.cmd == "options":
        from ortmlx import options

        print(options.format_table())
        return 0
    if args.cmd == "demo":
        from ortmlx import demo as demo_mod

        return demo_mod.main(seed=args.seed)
    return 1


if __name__ == "__main__":
    sys.exit(main())
