"""Checks that an image deploy/container/build.sh assembled is configured as deploy/container/Dockerfile's final
stage says: user, environment, working directory, volumes, ports, health check, entrypoint, command and labels.
Reads the Dockerfile with the official parser (the `dockerfile` package) and the image's configuration from
`podman image inspect` on stdin; exits 1 naming each difference.

    podman image inspect IMAGE | python same_image.py deploy/container/Dockerfile
"""

import json
import re
import sys

import dockerfile

UNITS = {"ms": 10**6, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}


def nanoseconds(text):
    return sum(int(number) * UNITS[unit] for number, unit in re.findall(r"(\d+)(ms|s|m|h)", text))


def pairs(value):
    """KEY=VALUE words, or one KEY VALUE pair, as the parser gives ENV and LABEL."""
    if len(value) == 2 and "=" not in value[0]:
        return {value[0]: value[1]}
    found = dict(zip(value[0::2], value[1::2]))
    return {key: text.strip('"') for key, text in found.items()}


def expected(path):
    commands = dockerfile.parse_file(path)
    last_from = max(i for i, command in enumerate(commands) if command.cmd == "FROM")
    want = {"Env": {}, "Labels": {}, "Volumes": set(), "ExposedPorts": set()}
    for command in commands[last_from + 1 :]:
        kind, value = command.cmd, command.value
        if kind == "USER":
            want["User"] = value[0]
        elif kind == "WORKDIR":
            want["WorkingDir"] = value[0]
        elif kind == "ENV":
            want["Env"].update(pairs(value))
        elif kind == "LABEL":
            want["Labels"].update(pairs(value))
        elif kind == "VOLUME":
            want["Volumes"].update(value)
        elif kind == "EXPOSE":
            want["ExposedPorts"].update(port if "/" in port else f"{port}/tcp" for port in value)
        elif kind == "ENTRYPOINT":
            want["Entrypoint"] = list(value)
        elif kind == "CMD":
            want["Cmd"] = list(value)
        elif kind == "HEALTHCHECK":
            flags = dict(flag.lstrip("-").split("=", 1) for flag in command.flags)
            want["Healthcheck"] = {
                "Test": list(value),
                "Interval": nanoseconds(flags.get("interval", "30s")),
                "Timeout": nanoseconds(flags.get("timeout", "30s")),
                "StartPeriod": nanoseconds(flags.get("start-period", "0s")),
                "Retries": int(flags.get("retries", "3")),
            }
    return want


def actual(inspected):
    config = inspected["Config"]
    env = dict(entry.split("=", 1) for entry in config.get("Env") or [])
    health = inspected.get("Healthcheck") or {}
    return {
        "User": config.get("User"),
        "WorkingDir": config.get("WorkingDir"),
        "Env": env,
        "Labels": config.get("Labels") or {},
        "Volumes": set(config.get("Volumes") or {}),
        "ExposedPorts": set(config.get("ExposedPorts") or {}),
        "Entrypoint": config.get("Entrypoint"),
        "Cmd": config.get("Cmd"),
        "Healthcheck": {key: health.get(key) for key in ("Test", "Interval", "Timeout", "StartPeriod", "Retries")},
    }


def main():
    want = expected(sys.argv[1])
    got = actual(json.load(sys.stdin)[0])
    differences = []
    for key, value in want.items():
        if key in ("Env", "Labels"):
            # The image may say more (build.sh adds the version label), never other values.
            wrong = {name: text for name, text in value.items() if got[key].get(name) != text}
            if wrong:
                differences.append(f"{key}: the Dockerfile says {wrong}, the image {got[key]}")
        elif got[key] != value:
            differences.append(f"{key}: the Dockerfile says {value!r}, the image {got[key]!r}")
    for difference in differences:
        print(f"same_image.py: {difference}", file=sys.stderr)
    if differences:
        sys.exit(1)
    print(f"the image is configured as {sys.argv[1]} says ({len(want)} settings)")


if __name__ == "__main__":
    main()
