"""The web UI is served by the API: the page, its script and stylesheet."""

from api_support import serve_app


def test_ui_is_served(tmp_path, local_embedder):
    with serve_app(tmp_path / "home", local_embedder, open_access=True, start_workers=False) as (client, _):
        page = client.get("/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert 'src="/ui/app.js"' in page.text and "<title>Groundwork</title>" in page.text
        script = client.get("/ui/app.js")
        assert script.status_code == 200 and "/v1/chat" in script.text and "/v1/kbs" in script.text
        assert client.get("/ui/style.css").status_code == 200
        assert client.get("/ui/missing.js").status_code == 404
        assert "/" not in client.get("/openapi.json").json()["paths"]
