"""sasl.jaas.config values as Kafka's JaasConfig reads them; errors that never show a value."""

from __future__ import annotations

import pytest

from lazyconv.errors import ConfigurationError
from lazyconv.net._jaas import (
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    mask_jaas_config,
    parse_jaas_config,
)

BROKER_PLAIN = (f'{PLAIN_LOGIN_MODULE} required user_alice="alice-secret" '
                'user_bob="bob-secret";')


def test_broker_plain_users() -> None:
    module = parse_jaas_config(BROKER_PLAIN)
    assert module.class_name == PLAIN_LOGIN_MODULE
    assert module.control_flag == "required"
    assert module.plain_users == {"alice": "alice-secret", "bob": "bob-secret"}


def test_client_scram_with_kafka_quoting_rules() -> None:
    text = (f"{SCRAM_LOGIN_MODULE} REQUIRED\n  username='al ice' /* a comment */\n"
            r'  password="p\"a\\s;s=w\101rd"  // trailing comment' "\n;")
    module = parse_jaas_config(text)
    assert module.control_flag == "required"
    assert module.options == {"username": "al ice", "password": 'p"a\\s;s=wArd'}


def test_unquoted_words_and_no_options() -> None:
    module = parse_jaas_config(f"{SCRAM_LOGIN_MODULE} required;")
    assert dict(module.options) == {}
    module = parse_jaas_config(f"{PLAIN_LOGIN_MODULE} optional username=bob password=x-y_z$1;")
    assert module.options == {"username": "bob", "password": "x-y_z$1"}


@pytest.mark.parametrize(("text", "message"), [
    ("", "no login module"),
    (f"{PLAIN_LOGIN_MODULE};", "no control flag"),
    (f"{PLAIN_LOGIN_MODULE} mandatory;", "invalid login module control flag"),
    (f'{PLAIN_LOGIN_MODULE} required password="s3cret"', "not terminated by a semicolon"),
    (f"{PLAIN_LOGIN_MODULE} required password=;", "value not specified for option 'password'"),
    (f"{PLAIN_LOGIN_MODULE} required password;", "value not specified"),
    (f'{PLAIN_LOGIN_MODULE} required password="s3cret;', "not closed on its line"),
    (f'{PLAIN_LOGIN_MODULE} required password="s3cret\n";', "not closed on its line"),
    (f'{PLAIN_LOGIN_MODULE} required password="a" password="s3cret";', "given twice"),
    (f"{PLAIN_LOGIN_MODULE} required; {PLAIN_LOGIN_MODULE} required;", "2 login modules"),
    (f"{PLAIN_LOGIN_MODULE} required /* password=s3cret", "never closed"),
    # a malformed line puts a value where a class, a flag or an option name belongs: named by
    # its position, never quoted
    ("s3cret", "the login module at character 1 has no control flag"),
    ("user_alice=my s3cret;", "no control flag"),
    (f"{PLAIN_LOGIN_MODULE} required user_alice=pa;s3cret;", "login module at character 80 has no"),
    (f"{PLAIN_LOGIN_MODULE} required user_alice=my s3cret;", "value not specified for the option at"),
    (f"{PLAIN_LOGIN_MODULE} s3cret;", "invalid login module control flag at character 57"),
    (f'{PLAIN_LOGIN_MODULE} required s3cret="a" s3cret="b";', "the option at character 77 is given"),
    (f'{PLAIN_LOGIN_MODULE} required user_bob="a" user_bob="b";', "option 'user_bob' is given twice"),
])
def test_errors_name_the_option_never_the_value(text: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message) as info:
        parse_jaas_config(text, "gw.properties:3 sasl.jaas.config")
    assert "s3cret" not in str(info.value)
    assert str(info.value).startswith("gw.properties:3 sasl.jaas.config: ")


def test_repr_hides_secrets() -> None:
    module = parse_jaas_config(f'{PLAIN_LOGIN_MODULE} required username="alice" '
                               'password="s3cret" user_bob="b0b" clientSecret="c";')
    text = repr(module)
    assert "alice" in text and "s3cret" not in text and "b0b" not in text and '"c"' not in text


def test_mask_keeps_the_rest() -> None:
    text = (f'{PLAIN_LOGIN_MODULE} required username="alice" password="s3cret" '
            "user_bob=b0b;")
    masked = mask_jaas_config(text)
    assert masked == (f'{PLAIN_LOGIN_MODULE} required username="alice" password="[hidden]" '
                      'user_bob="[hidden]";')
    assert mask_jaas_config('x required password="unterminated') == "[hidden]"
