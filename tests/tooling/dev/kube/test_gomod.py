"""The wrapper go.mod through which the Kubernetes commands are built."""

import pytest

from dev.kube import gomod

KUBERNETES_GO_MOD = """module k8s.io/kubernetes

require (
\tk8s.io/api v0.0.0
\tgithub.com/spf13/cobra v1.8.1
)

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/apimachinery => ./staging/src/k8s.io/apimachinery
\tk8s.io/cri-api => ./staging/src/k8s.io/cri-api
\tgithub.com/example/fork => ../fork
)

replace k8s.io/kubectl => ./staging/src/k8s.io/kubectl
"""


def test_each_staging_replace_points_at_the_published_module():
    text = gomod.wrapper_go_mod("v1.33.13", KUBERNETES_GO_MOD)
    assert "require k8s.io/kubernetes v1.33.13\n" in text
    for name in ("api", "apimachinery", "cri-api", "kubectl"):
        assert f"\tk8s.io/{name} => k8s.io/{name} v0.33.13\n" in text
    assert "fork" not in text and "staging" not in text


def test_a_go_mod_without_staging_replaces_is_refused():
    with pytest.raises(ValueError, match="no staging module"):
        gomod.wrapper_go_mod("v1.33.13", "module k8s.io/kubernetes\n")


def test_the_version_is_set_in_the_binaries():
    assert "gitVersion=v1.33.13" in gomod.version_ldflags("v1.33.13")
    assert "gitMinor=33" in gomod.version_ldflags("v1.33.13")
