import shutil
import tarfile
from io import BytesIO
from pathlib import Path

import pytest

from pytest_webperf import cli
from pytest_webperf.errors import CatalogError
from pytest_webperf.targets.catalog import (
    BUILTIN_DIR,
    Catalog,
    build_context,
    context_hash,
    default_directories,
    image_tag,
)


def server(base: Path, name: str, toml: str = "", dockerfile: bool = True) -> Path:
    directory = base / name
    directory.mkdir(parents=True)
    (directory / "server.toml").write_text(f'name = "{name}"\n{toml}')
    if dockerfile:
        (directory / "Dockerfile").write_text("FROM debian:bookworm-slim\n")
    return directory


def test_include_adds_shared_files_to_the_context_and_the_hash(tmp_path):
    shared = tmp_path / "_shared" / "lib"
    shared.mkdir(parents=True)
    (shared / "routes.py").write_text("ROUTES = 1\n")
    server(tmp_path, "app", 'include = ["../_shared/lib"]\n')
    spec = Catalog([tmp_path]).get("app")
    with tarfile.open(fileobj=BytesIO(build_context(spec))) as archive:
        names = archive.getnames()
    assert "include/lib/routes.py" in names and "assets/file.png" in names
    before = context_hash(spec)
    (shared / "routes.py").write_text("ROUTES = 2\n")
    assert context_hash(spec) != before  # a change in shared code rebuilds the image


def test_include_outside_the_catalogue_is_refused(tmp_path):
    server(tmp_path / "cat", "app", 'include = ["../../elsewhere"]\n')
    (tmp_path / "elsewhere").mkdir()
    with pytest.raises(CatalogError, match="not a directory of this catalogue"):
        Catalog([tmp_path / "cat"])


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('kind = "ftp"\n', "kind must be one of"),
        ('colour = "blue"\n', "unknown key 'colour'"),
        ("[[depends]]\nserver = 1\n", "exactly 'server' and 'port_env'"),
        ("routes = 3\n", "'routes' must be a list of strings"),
        ("startup_timeout = [\n", "cannot read"),
        ('tls = "yes"\n', "'tls' must be true or false"),
        ('kind = "tcp"\ntls = true\n', '\'tls = true\' is for kind = "http", "mqtt" or "grpc"'),
        ('protocols = ["h3"]\n', "protocols: 'h3' is not one of http1, http2"),
        ('kind = "mqtt"\nprotocols = ["http2"]\n', "protocols: 'http2' is not spoken by kind"),
        ("protocols = []\n", "protocols: name at least one"),
    ],
)
def test_bad_server_toml_names_the_file(tmp_path, toml, message):
    directory = server(tmp_path, "bad", toml)
    with pytest.raises(CatalogError, match=message) as info:
        Catalog([tmp_path])
    assert str(directory / "server.toml") in str(info.value)


def test_unknown_server_lists_the_known_ones(tmp_path):
    server(tmp_path, "one")
    with pytest.raises(CatalogError, match="known: one"):
        Catalog([tmp_path]).get("two")


def test_dependency_cycle_is_an_error(tmp_path):
    server(tmp_path, "a", '[[depends]]\nserver = "b"\nport_env = "B"\n')
    server(tmp_path, "b", '[[depends]]\nserver = "a"\nport_env = "A"\n')
    with pytest.raises(CatalogError, match="cycle"):
        Catalog([tmp_path]).closure("a")


def test_image_from_needs_no_dockerfile_and_builds_the_other(tmp_path):
    server(tmp_path, "base")
    server(tmp_path, "variant", 'image_from = "base"\n', dockerfile=False)
    catalog = Catalog([tmp_path])
    assert catalog.image_spec(catalog.get("variant")).name == "base"


def test_the_builtin_catalogue_loads():
    names = Catalog(default_directories()).names()
    assert {"nginx", "apache-php", "node", "go", "tomcat", "varnish", "mosquitto"} <= set(names)


def test_a_users_directory_replaces_a_builtin_entry_of_the_same_name(tmp_path):
    mine = tmp_path / "servers"
    shutil.copytree(BUILTIN_DIR / "nginx", mine / "nginx")
    catalog = Catalog(default_directories([mine]))
    assert catalog.get("nginx").directory == mine / "nginx"
    assert [s.directory for s in catalog.shadowed("nginx")] == [BUILTIN_DIR / "nginx"]
    assert catalog.get("mosquitto").directory == BUILTIN_DIR / "mosquitto"  # the rest stays
    assert catalog.shadowed("mosquitto") == ()


def test_a_copy_of_a_server_has_the_same_image_tag(tmp_path):
    """Tags are content hashes: the same files build once, wherever they were found."""
    shutil.copytree(BUILTIN_DIR / "nginx", tmp_path / "nginx")
    for path in (tmp_path / "nginx").rglob("*"):
        path.chmod(0o775 if path.is_dir() or path.stat().st_mode & 0o100 else 0o664)  # umask 002
    copy = Catalog([tmp_path]).get("nginx")
    assert image_tag(copy) == image_tag(Catalog([BUILTIN_DIR]).get("nginx"))


def test_unknown_server_with_no_directory_says_so(tmp_path):
    with pytest.raises(CatalogError, match=r"\(no catalogue directory was found\); known: none"):
        Catalog([]).get("nginx")


def test_unknown_server_names_the_directories_searched(tmp_path):
    server(tmp_path, "one")
    with pytest.raises(CatalogError, match=f"searched {tmp_path}"):
        Catalog([tmp_path]).get("two")


def test_list_says_where_each_entry_came_from(tmp_path, monkeypatch, capsys):
    shutil.copytree(BUILTIN_DIR / "nginx", tmp_path / "servers" / "nginx")
    server(tmp_path / "servers", "app")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["list"]) == 0
    lines = {line.split()[0]: line.split()[2:] for line in capsys.readouterr().out.splitlines()}
    assert lines["app"][0] == "servers"
    assert lines["nginx"][:3] == ["servers", "(replaces", "built-in)"]
    assert lines["mosquitto"][0] == "built-in"


def test_tls_is_off_unless_asked_and_nginx_tls_speaks_it(tmp_path):
    server(tmp_path, "plain")
    server(tmp_path, "secure", "tls = true\n")
    catalog = Catalog([tmp_path])
    assert not catalog.get("plain").tls
    assert catalog.get("secure").tls
    builtin = Catalog([BUILTIN_DIR])
    assert builtin.get("nginx-tls").tls and not builtin.get("nginx").tls
    assert builtin.get("nginx-tls").routes == builtin.get("nginx").routes
    assert builtin.get("mosquitto-tls").tls and builtin.get("mosquitto-tls").kind == "mqtt"


def test_every_builtin_server_says_what_it_is_loaded_in():
    catalog = Catalog(default_directories())
    spoken = {spec.name: spec.protocols for spec in catalog}
    assert spoken["nginx-h2c"] == ("http2",)  # h2c with prior knowledge only
    assert spoken["nginx-h2"] == ("http1", "http2")
    assert spoken["grpc-go"] == ("grpc",)
    assert spoken["nginx"] == ("http1",)
    assert spoken["go-mqtt"] == ("http1", "mqtt")
    assert spoken["mosquitto-ws"] == ("mqtt",)
    assert spoken["node-streams"] == ("http1", "websocket", "sse")
    assert spoken["mariadb"] == ()  # a store: loaded through the servers that use it
