use super::*;

#[test]
fn scalars_read_back_as_written() {
    assert_eq!(scalar(&toml::Value::Float(0.7)), "0.7");
    assert_eq!(scalar(&toml::Value::Float(1.0)), "1.0");
    assert_eq!(scalar(&toml::Value::Float(1e-5)), "1.0e-5");
    assert_eq!(scalar(&toml::Value::Integer(16)), "16");
    assert_eq!(scalar(&toml::Value::String("server".into())), "server");
    assert_eq!(scalar(&toml::Value::String("true".into())), "\"true\"");
    assert_eq!(scalar(&toml::Value::String("on".into())), "\"on\"");
    assert_eq!(scalar(&toml::Value::String("a b".into())), "\"a b\"");
}

#[test]
fn spans_end_where_the_value_does() {
    assert_eq!(closing("'it''s' # c", '\''), Some(7));
    assert_eq!(closing(r#""a\"b" x"#, '"'), Some(6));
    assert_eq!(bracket("[a, ']', [b]] # c"), Some(13));
    assert_eq!(comment_start("abc #d"), Some(4));
    assert_eq!(comment_start("a#b"), None);
    assert_eq!(line_end("a\r\nb"), "\r\n");
    assert_eq!(line_end("a\rb"), "\r");
    assert_eq!(line_end("a"), "\n");
}
