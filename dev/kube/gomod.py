"""The wrapper Go module through which the Kubernetes commands are built.

k8s.io/kubernetes cannot be built on its own from the module proxy: its go.mod replaces every
staging module with a folder (``./staging/src/k8s.io/<name>``) that its module zip leaves out.
The wrapper requires it and points each of those replaces at the published module instead.
"""

import re

COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kubectl")

_STAGING_REPLACE = re.compile(r"^\s*(?:replace\s+)?(k8s\.io/[\w.-]+)\s+=>\s+\./staging/src/\1\s*$")


def staging_modules(kubernetes_go_mod: str) -> list[str]:
    """The modules k8s.io/kubernetes's own go.mod replaces with a staging folder, in order."""
    return [
        m.group(1) for line in kubernetes_go_mod.splitlines() if (m := _STAGING_REPLACE.match(line))
    ]


def staging_version(version: str) -> str:
    """Staging modules are published as v0.<minor>.<patch> beside Kubernetes v1.<minor>.<patch>."""
    major, minor, patch = version.removeprefix("v").split(".")
    if major != "1":
        raise ValueError(
            f"Kubernetes version {version} is not a v1 release; staging versions are unknown."
        )
    return f"v0.{minor}.{patch}"


def wrapper_go_mod(version: str, kubernetes_go_mod: str) -> str:
    """go.mod of the wrapper module for Kubernetes ``version``."""
    modules = staging_modules(kubernetes_go_mod)
    if not modules:
        raise ValueError("k8s.io/kubernetes's go.mod names no staging module; its layout changed.")
    published = staging_version(version)
    replaces = "".join(f"\t{m} => {m} {published}\n" for m in modules)
    return (
        "module opensandbox-provider/kube\n\n"
        f"require k8s.io/kubernetes {version}\n\n"
        f"replace (\n{replaces})\n"
    )


def tools_go() -> str:
    """tools.go: imports each command so `go mod tidy` keeps everything they need."""
    imports = "".join(f'\t_ "k8s.io/kubernetes/cmd/{c}"\n' for c in COMMANDS)
    return f"//go:build tools\n\npackage tools\n\nimport (\n{imports})\n"


def version_ldflags(version: str) -> str:
    """The variables Kubernetes' own build sets; without them every binary says v0.0.0-master."""
    _, minor, _ = version.removeprefix("v").split(".")
    pkg = "k8s.io/component-base/version"
    return f"-X {pkg}.gitVersion={version} -X {pkg}.gitMajor=1 -X {pkg}.gitMinor={minor}"
