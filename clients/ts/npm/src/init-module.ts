import { initSync } from "./wasm/core.js";
import wasm from "./wasm/core_bg.wasm";

initSync({ module: wasm });
