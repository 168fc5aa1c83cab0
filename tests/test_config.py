import pytest

from groundwork.config import load_settings, model_env_suffix
from groundwork.errors import ConfigError


@pytest.mark.parametrize("name,value", [
    ("GROUNDWORK_TOP_K", "0"), ("GROUNDWORK_TOP_K", "eight"), ("GROUNDWORK_EMBEDDER", "magic"),
    ("RAG_CONTEXT_MAX_CHARS", "-5"), ("GROUNDWORK_CHUNK_UNIT", "words"),
    ("RAG_CONTEXT_MAX_CHARS_GPT_4O", "lots"),
])
def test_bad_values_fail_at_start_naming_the_variable(monkeypatch, tmp_path, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as err:
        load_settings(home=tmp_path)
    assert name in err.value.message


def test_model_budget_names():
    assert model_env_suffix("gpt-4o-mini") == "GPT_4O_MINI"
    assert model_env_suffix("openai/gpt-4.1") == "OPENAI_GPT_4_1"
    assert model_env_suffix("llama3.1:8b") == "LLAMA3_1_8B"


def test_dotenv_file_is_read(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GROUNDWORK_TOP_K", raising=False)
    (tmp_path / ".env").write_text("GROUNDWORK_TOP_K=5\n")
    assert load_settings().top_k == 5


def test_openai_api_key_is_an_alias_and_llm_needs_a_model(monkeypatch, tmp_path):
    monkeypatch.delenv("GROUNDWORK_LLM_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    settings = load_settings(home=tmp_path)
    assert settings.llm_api_key == "sk-test" and not settings.llm_configured
    assert load_settings(home=tmp_path, llm_model="gpt-4o-mini").llm_configured


def test_chunking_defaults_fit_the_model_and_chars_mode(tmp_path):
    settings = load_settings(home=tmp_path)
    assert settings.effective_chunking(254) == ("tokens", 180, 30)
    assert load_settings(home=tmp_path, chunk_unit="chars").effective_chunking(254) == ("chars", 1500, 200)
    with pytest.raises(ConfigError):
        load_settings(home=tmp_path, chunk_size=100, chunk_overlap=100).effective_chunking(254)
