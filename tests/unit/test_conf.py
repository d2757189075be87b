"""Options: every group listed, typed, defaulted, secrets marked."""

from __future__ import annotations

import configparser
import os
import pathlib
import textwrap
from importlib import metadata
from typing import Any

import pytest
from keystoneauth1 import loading
from oslo_config import cfg, generator

from swflows import conf, exceptions

ROOT = pathlib.Path(__file__).resolve().parents[2]
GROUPS = {
    "DEFAULT",
    "watcher",
    "runner",
    "database",
    "stack_user",
    "jobboard",
    "coordination",
    "identity",
    "object_store",
    "messaging",
    "compute",
    "trustee",
}


def listed() -> dict[str, list[cfg.Opt]]:
    return {(g if isinstance(g, str) else g.name): opts for g, opts in conf.list_opts()}


def write(tmp_path: pathlib.Path, text: str) -> str:
    path = tmp_path / "swflows.conf"
    path.write_text(textwrap.dedent(text))
    return str(path)


class TestListOpts:
    def test_every_group(self) -> None:
        assert set(listed()) == GROUPS

    def test_every_option_is_documented(self) -> None:
        for group, opts in listed().items():
            assert opts, group
            for opt in opts:
                assert opt.help, f"[{group}] {opt.name} has no help"

    def test_no_duplicates(self) -> None:
        for group, opts in listed().items():
            names = [o.dest for o in opts]
            assert len(names) == len(set(names)), group

    def test_registered_options_are_listed(self) -> None:
        c = conf.get_conf()
        bare = cfg.ConfigOpts()
        bare([], default_config_files=[], default_config_dirs=[])
        builtin = set(bare)  # --config-file and friends
        for group, opts in listed().items():
            section = c if group == "DEFAULT" else c[group]
            registered = {
                name
                for name in section
                if not isinstance(section[name], cfg.ConfigOpts.GroupAttr)
                and not (group == "DEFAULT" and name in builtin)
            }
            listed_names = {o.dest for o in opts}
            # plugin options (username, password, ...) are registered when
            # the auth plugin loads; everything else is registered up front
            assert registered <= listed_names, group
            plugin = {o.dest for o in loading.get_auth_plugin_conf_options("password")}
            if group in (*conf.CLIENT_GROUPS, conf.TRUSTEE_GROUP):
                assert listed_names - registered <= plugin, group
            else:
                assert listed_names == registered, group

    def test_client_groups(self) -> None:
        opts = listed()
        for group in conf.CLIENT_GROUPS:
            names = {o.dest for o in opts[group]}
            assert {
                "auth_type",
                "auth_section",
                "auth_url",
                "username",
                "password",
                "cafile",
                "insecure",
                "timeout",
                "region_name",
                "interface",
                "endpoint_override",
            } <= names
        assert {"auth_version", "v1_auth_url", "v1_user", "v1_key"} <= {
            o.dest for o in opts["object_store"]
        }
        assert "url" in {o.dest for o in opts["messaging"]}

    def test_secrets_are_marked(self) -> None:
        secret = {
            (group, o.dest)
            for group, opts in listed().items()
            for o in opts
            if o.secret
        }
        assert {
            ("database", "connection"),
            ("database", "secret_key"),
            ("stack_user", "stack_domain_admin_password"),
            ("object_store", "v1_key"),
            ("jobboard", "backend_url"),
            ("coordination", "backend_url"),
        } <= secret
        for group in conf.CLIENT_GROUPS:
            assert (group, "password") in secret

    def test_entry_point_declared(self) -> None:
        setup = configparser.ConfigParser()
        setup.read(ROOT / "setup.cfg")
        lines = setup["entry_points"]["oslo.config.opts"].split("\n")
        assert "swflows = swflows.conf:list_opts" in [line.strip() for line in lines]

    def test_sample_generator(
        self, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """oslo-config-generator --namespace swflows, via the declared entry point."""
        entry = metadata.EntryPoint(
            "swflows", "swflows.conf:list_opts", "oslo.config.opts"
        )
        monkeypatch.setattr(
            generator,
            "_get_raw_opts_loaders",
            lambda namespaces: [(n, entry.load()) for n in namespaces],
        )
        out = tmp_path / "swflows.conf.sample"
        generator.main(["--namespace", "swflows", "--output-file", str(out)])
        sample = out.read_text()
        for group in GROUPS:
            assert f"[{group}]" in sample
        assert "#default_deployment_signal_transport = TEMP_URL_SIGNAL" in sample
        assert "#connection = sqlite:///$XDG_STATE_HOME/swflows/swflows.sqlite" in (
            sample
        )
        assert "#stack_user_role = heat_stack_user" in sample
        # and the sample is itself a valid configuration file
        assert conf.get_conf(config_files=[str(out)]).deployment_timeout == 3600


class TestDefaults:
    def test_default_group(self) -> None:
        c = conf.get_conf()
        assert c.default_deployment_signal_transport == "TEMP_URL_SIGNAL"
        assert c.default_software_config_transport == "POLL_TEMP_URL"
        assert c.auto_signal_transport_order == [
            "TEMP_URL_SIGNAL",
            "ZAQAR_SIGNAL",
            "HEAT_SIGNAL",
        ]
        assert c.deployment_timeout == 3600
        assert c.delivery_timeout == 600
        assert c.tempurl_grace_period == 600
        assert c.tempurl_digest == "sha256"
        assert c.signal_container == "swflows-signals"
        assert c.metadata_container == "swflows-metadata"
        assert c.zaqar_signal_auth == "signed_url"
        assert c.max_signal_bytes == 1048576

    def test_groups(self) -> None:
        c = conf.get_conf()
        assert (
            c.watcher.poll_interval,
            c.watcher.poll_jitter,
            c.watcher.max_poll_interval,
            c.watcher.backoff_multiplier,
        ) == (0.5, 0.1, 30.0, 1.5)
        assert c.database.connection is None
        assert c.database.table_prefix == "swflows_"
        assert c.database.secret_key is None
        assert c.database.secret_key_file is None
        assert c.stack_user.stack_user_role == "heat_stack_user"
        assert c.stack_user.stack_user_domain_id is None
        assert c.jobboard.enabled is False
        assert c.jobboard.backend_url == "redis://127.0.0.1:6379/0"
        assert c.jobboard.claim_expiry == 30
        assert c.coordination.backend_url is None  # every runner watches
        assert c.coordination.leader_timeout == 10
        for group in conf.CLIENT_GROUPS:
            assert c[group].interface == "public"
            assert c[group].region_name is None
            assert c[group].endpoint_override is None
            assert c[group].auth_type is None
        assert c.object_store.auth_version == "keystone"
        assert c.messaging.url is None


class TestValues:
    def test_config_file(self, tmp_path: pathlib.Path) -> None:
        path = write(
            tmp_path,
            """
            [DEFAULT]
            default_deployment_signal_transport = temp_url_poll
            default_software_config_transport = zaqar_message
            auto_signal_transport_order = zaqar_message, heat_signal
            deployment_timeout = 60

            [watcher]
            poll_interval = 0.5

            [object_store]
            auth_version = v1
            v1_user = test:tester
            """,
        )
        c = conf.get_conf(config_files=[path])
        assert c.default_deployment_signal_transport == "TEMP_URL_SIGNAL"
        assert c.default_software_config_transport == "ZAQAR_MESSAGE"
        assert c.auto_signal_transport_order == ["ZAQAR_SIGNAL", "HEAT_SIGNAL"]
        assert c.deployment_timeout == 60
        assert c.watcher.poll_interval == 0.5
        assert c.object_store.auth_version == "v1"
        assert c.object_store.v1_user == "test:tester"

    def test_config_file_from_args(self, tmp_path: pathlib.Path) -> None:
        path = write(tmp_path, "[jobboard]\nenabled = true\n")
        assert conf.get_conf(["--config-file", path]).jobboard.enabled is True

    @pytest.mark.parametrize(
        "text",
        [
            "[DEFAULT]\ndefault_deployment_signal_transport = PIGEON\n",
            "[DEFAULT]\ndefault_software_config_transport = TEMP_URL_SIGNAL\n",
            "[DEFAULT]\nauto_signal_transport_order = TEMP_URL_SIGNAL,AUTO\n",
            "[DEFAULT]\ndeployment_timeout = 0\n",
            "[DEFAULT]\ndelivery_timeout = -1\n",
            "[DEFAULT]\ntempurl_digest = sha1\n",
            "[DEFAULT]\nzaqar_signal_auth = token\n",
            "[DEFAULT]\nmax_signal_bytes = 10\n",
            "[DEFAULT]\nsignal_container = a/b\n",
            "[watcher]\npoll_interval = 0\n",
            "[watcher]\npoll_jitter = 1.5\n",
            "[watcher]\nbackoff_multiplier = 0.5\n",
            "[database]\ntable_prefix = 1bad-\n",
            "[identity]\ninterface = private\n",
            "[object_store]\nauth_version = v2\n",
        ],
    )
    def test_bad_values_refused(self, tmp_path: pathlib.Path, text: str) -> None:
        c = conf.get_conf(config_files=[write(tmp_path, text)])
        group, _, rest = text.partition("]\n")
        name = rest.split(" = ")[0]
        section: Any = c if group == "[DEFAULT" else c[group[1:]]
        with pytest.raises(cfg.ConfigFileValueError):
            getattr(section, name)

    def test_override_is_checked_and_normalised(self) -> None:
        c = conf.get_conf()
        c.set_override("default_deployment_signal_transport", "zaqar_message")
        assert c.default_deployment_signal_transport == "ZAQAR_SIGNAL"
        with pytest.raises(ValueError, match="unknown transport"):
            c.set_override("default_deployment_signal_transport", "bogus")

    def test_empty_table_prefix_allowed(self, tmp_path: pathlib.Path) -> None:
        c = conf.get_conf(
            config_files=[write(tmp_path, "[database]\ntable_prefix =\n")]
        )
        assert c.database.table_prefix == ""


class TestIndependence:
    def test_new_instance_each_time(self) -> None:
        first, second = conf.get_conf(), conf.get_conf()
        assert first is not second
        first.set_override("deployment_timeout", 5)
        assert first.deployment_timeout == 5
        assert second.deployment_timeout == 3600

    def test_global_conf_untouched(self) -> None:
        conf.get_conf()
        assert "deployment_timeout" not in cfg.CONF

    def test_register_opts_on_a_fresh_conf(self) -> None:
        c = cfg.ConfigOpts()
        conf.register_opts(c)
        c([], default_config_files=[], default_config_dirs=[])
        assert c.watcher.poll_interval == 0.5

    def test_environment_only_when_asked(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("OS_DEFAULT__DEPLOYMENT_TIMEOUT", "42")
        assert conf.get_conf().deployment_timeout == 3600
        assert conf.get_conf(use_env=True).deployment_timeout == 42

    def test_keystoneauth_loads_from_a_client_group(
        self, tmp_path: pathlib.Path
    ) -> None:
        path = write(
            tmp_path,
            """
            [identity]
            auth_type = password
            auth_url = http://127.0.0.1:5000/v3
            username = admin
            password = secret
            project_name = admin
            user_domain_id = default
            project_domain_id = default
            timeout = 7
            """,
        )
        c = conf.get_conf(config_files=[path])
        auth = loading.load_auth_from_conf_options(c, "identity")
        assert getattr(auth, "auth_url", None) == "http://127.0.0.1:5000/v3"
        session = loading.load_session_from_conf_options(c, "identity", auth=auth)
        assert session.timeout == 7.0
        assert c.identity.password == "secret"


class TestPaths:
    def test_state_dir_from_xdg(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("XDG_STATE_HOME", "/var/state")
        assert conf.default_state_dir() == "/var/state/swflows"

    @pytest.mark.parametrize("xdg", [None, "", "relative/dir"])
    def test_state_dir_fallback(
        self, monkeypatch: pytest.MonkeyPatch, xdg: str | None
    ) -> None:
        monkeypatch.setenv("HOME", "/home/op")
        if xdg is None:
            monkeypatch.delenv("XDG_STATE_HOME", raising=False)
        else:
            monkeypatch.setenv("XDG_STATE_HOME", xdg)
        assert conf.default_state_dir() == "/home/op/.local/state/swflows"

    def test_database_defaults(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("XDG_STATE_HOME", "/srv/st")
        c = conf.get_conf()
        assert conf.database_connection(c) == "sqlite:////srv/st/swflows/swflows.sqlite"
        assert conf.secret_key_file(c) == "/srv/st/swflows/secret.key"
        c.set_override("connection", "postgresql://u:p@db/swflows", group="database")
        c.set_override("secret_key_file", "/etc/swflows/key", group="database")
        assert conf.database_connection(c) == "postgresql://u:p@db/swflows"
        assert conf.secret_key_file(c) == "/etc/swflows/key"
        assert not os.path.exists("/srv/st/swflows")  # nothing is created


def test_overrides_do_not_leak_between_instances() -> None:
    first = conf.get_conf()
    first.set_override("table_prefix", "leak_", "database")
    first.set_override("poll_interval", 9.0, "watcher")
    second = conf.get_conf()
    assert second.database.table_prefix == "swflows_"
    assert second.watcher.poll_interval != 9.0


class TestCheckValues:
    """A value its option's type refuses fails at once, naming the option,
    the file and why; the text of a bad connection URL is not repeated."""

    @pytest.mark.parametrize(
        ("text", "field", "says"),
        [
            (
                "[object_store]\nauth_version = v9\n",
                "[object_store] auth_version",
                "v9",
            ),
            ("[runner]\nworkers = many\n", "[runner] workers", "many"),
            (
                "[DEFAULT]\ndeployment_timeout = soon\n",
                "[DEFAULT] deployment_timeout",
                "soon",
            ),
            (
                "[database]\nconnection = not a url:secret\n",
                "[database] connection",
                "not a database URL",
            ),
            (
                "[database]\nconnection = xx://u:secret@h/d\n",
                "[database] connection",
                "no database driver for 'xx'",
            ),
        ],
    )
    def test_refused(
        self, tmp_path: pathlib.Path, text: str, field: str, says: str
    ) -> None:
        path = tmp_path / "bad.conf"
        path.write_text(text)
        options = conf.get_conf(config_files=[str(path)])
        with pytest.raises(exceptions.ValidationError) as err:
            conf.check_values(options)
        assert err.value.field == field
        assert str(path) in err.value.reason and says in err.value.reason
        assert "secret" not in str(err.value)

    def test_good_values_pass(self, tmp_path: pathlib.Path) -> None:
        path = tmp_path / "good.conf"
        path.write_text("[runner]\nworkers = 3\n[database]\nconnection = sqlite://\n")
        conf.check_values(conf.get_conf(config_files=[str(path)]))
