"""The policy rules, their sample file, and the deployment policy's form."""

from __future__ import annotations

import configparser
import pathlib
from importlib import metadata

import pytest
import yaml
from oslo_config import cfg
from oslo_context import context as oslo_context
from oslo_policy import generator
from oslo_policy import opts as policy_opts

from swflows import exceptions, policies, projects

ROOT = pathlib.Path(__file__).resolve().parents[2]
MEMBER = oslo_context.RequestContext(project_id="p1", user_id="u1", roles=["member"])


def test_entry_point_declared() -> None:
    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    lines = setup["entry_points"]["oslo.policy.policies"].split("\n")
    assert "swflows = swflows.policies:list_rules" in [line.strip() for line in lines]


def test_sample_generator_writes_every_rule(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """oslopolicy-sample-generator --namespace swflows, via the entry point."""
    entry = metadata.EntryPoint(
        "swflows", "swflows.policies:list_rules", "oslo.policy.policies"
    )
    monkeypatch.setattr(
        generator,
        "get_policies_dict",
        lambda namespaces: {n: entry.load()() for n in namespaces},
    )
    out = tmp_path / "policy.yaml.sample"
    generator.generate_sample(
        ["--namespace", "swflows", "--output-file", str(out)], conf=cfg.ConfigOpts()
    )
    text = out.read_text()
    names = {rule.name for rule in policies.list_rules()}
    assert "swflows:deployment:create" in names
    for name in names:
        assert f'#"{name}":' in text, name
    # uncommented, the sample is a valid policy file with the defaults
    rules = yaml.safe_load(
        "\n".join(line[1:] for line in text.splitlines() if line.startswith('#"'))
    )
    assert rules["swflows:all_projects"] == "rule:context_is_admin"
    assert rules["admin_or_owner"] == (
        "rule:context_is_admin or project_id:%(project_id)s"
    )


def test_rules_owner_and_admin() -> None:
    conf = cfg.ConfigOpts()
    conf([])
    policies.authorize(conf, MEMBER, "swflows:deployment:show", {"project_id": "p1"})
    with pytest.raises(exceptions.Forbidden) as refused:
        policies.authorize(
            conf, MEMBER, "swflows:deployment:show", {"project_id": "p2"}
        )
    assert refused.value.rule == "swflows:deployment:show"
    admin = oslo_context.RequestContext(project_id="p9", roles=["admin"])
    assert policies.is_admin(conf, admin)
    assert not policies.is_admin(conf, MEMBER)
    policies.authorize(conf, admin, "swflows:all_projects", {})
    with pytest.raises(exceptions.Forbidden):
        policies.authorize(conf, MEMBER, "swflows:all_projects", {})


def test_a_policy_file_overrides_a_default(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text('"swflows:config:create": "role:deployer"\n')
    conf = cfg.ConfigOpts()
    conf([])
    policy_opts.set_defaults(conf, policy_file=str(path))
    with pytest.raises(exceptions.Forbidden):
        policies.authorize(conf, MEMBER, "swflows:config:create", {"project_id": "p1"})
    deployer = oslo_context.RequestContext(project_id="p1", roles=["deployer"])
    policies.authorize(conf, deployer, "swflows:config:create", {"project_id": "p1"})


class TestDeployPolicy:
    def test_default_is_same_project(self) -> None:
        policy = projects.DeployPolicy.from_dict(None)
        policy.check("s", "p1", "p1", "c")
        with pytest.raises(exceptions.Forbidden) as refused:
            policy.check("s", "p1", "p2", "c")
        assert refused.value.rule == projects.DEPLOY_RULE
        assert "server s admits deployments from its own project only" in str(
            refused.value
        )

    def test_parse_the_command_line_form(self) -> None:
        parsed = projects.DeployPolicy.parse("projects:p2, p3", ["c1"])
        assert parsed.to_dict() == {
            "mode": "projects",
            "projects": ["p2", "p3"],
            "config_ids": ["c1"],
        }
        parsed.check("s", "p1", "p3", "c1")
        with pytest.raises(exceptions.Forbidden, match="config_ids"):
            parsed.check("s", "p1", "p3", "c2")
        projects.DeployPolicy.parse("any").check("s", "p1", "p7", "c")

    @pytest.mark.parametrize(
        ("value", "field"),
        [
            ({"mode": "everyone"}, "deploy_policy"),
            ({"mode": "projects"}, "deploy_policy.projects"),
            ({"mode": "any", "projects": ["p"]}, "deploy_policy.projects"),
            ({"mode": "any", "config_ids": "c1"}, "deploy_policy.config_ids"),
            ({"mode": "any", "who": 1}, "deploy_policy"),
            ("any", "deploy_policy"),
        ],
    )
    def test_bad_policies_name_the_field(self, value: object, field: str) -> None:
        with pytest.raises(exceptions.ValidationError) as bad:
            projects.DeployPolicy.from_dict(value)  # type: ignore[arg-type]
        assert bad.value.field == field
