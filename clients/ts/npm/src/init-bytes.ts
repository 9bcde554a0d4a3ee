import init from "./wasm/core.js";
import { WASM_BASE64 } from "./wasm/inline.js";

const binary = atob(WASM_BASE64);
const bytes = new Uint8Array(binary.length);
for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
// Asynchronous: browsers refuse to compile a module this size synchronously on the main thread.
await init({ module_or_path: bytes });
