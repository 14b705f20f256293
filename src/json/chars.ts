// The ASCII bytes the byte-level readers test for: JSON's punctuation and whitespace (the strict
// scanner, the tokenizer, the protocols' peeks before a parse) and the event-stream framer's
// line ends and field separator. One definition each, so that every reader names them alike. A
// const enum: the bundle holds each as its number with its name beside it (`34 /* QUOTE */`).

export const enum Char {
  QUOTE = 0x22,
  BACKSLASH = 0x5c,
  OPEN_BRACE = 0x7b,
  CLOSE_BRACE = 0x7d,
  OPEN_BRACKET = 0x5b,
  CLOSE_BRACKET = 0x5d,
  COLON = 0x3a,
  COMMA = 0x2c,
  SPACE = 0x20,
  TAB = 0x09,
  LF = 0x0a,
  CR = 0x0d,
}
