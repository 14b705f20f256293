// The ASCII bytes the byte-level readers test for: JSON's punctuation and whitespace (the strict
// scanner, the tokenizer, the protocols' peeks before a parse) and the event-stream framer's
// line ends and field separator. One definition each, so that every reader names them alike.

export const QUOTE = 0x22;
export const BACKSLASH = 0x5c;
export const OPEN_BRACE = 0x7b;
export const CLOSE_BRACE = 0x7d;
export const OPEN_BRACKET = 0x5b;
export const CLOSE_BRACKET = 0x5d;
export const COLON = 0x3a;
export const COMMA = 0x2c;
export const SPACE = 0x20;
export const TAB = 0x09;
export const LF = 0x0a;
export const CR = 0x0d;
