// The entry point for Cloudflare Workers (the `workerd` export condition,
// which wrangler and esbuild's `--conditions=workerd` pick): a Worker may not
// compile wasm from bytes at run time, so the wasm is imported as a module
// (wrangler uploads it as one) and instantiated synchronously.
import "./init-module.js";
export * from "./api.js";
