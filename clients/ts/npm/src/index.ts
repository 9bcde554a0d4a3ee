// The entry point for Node, Deno, browsers and bundlers: the wasm is
// inlined (base64) and instantiated asynchronously from its bytes at import
// time (top-level await), so nothing is fetched or read from disk.
import "./init-bytes.js";
export * from "./api.js";
