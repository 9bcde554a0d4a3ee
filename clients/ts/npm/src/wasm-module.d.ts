// A `.wasm` import as Workers (and wrangler's bundler) give it: a compiled module.
declare module "*.wasm" {
  const module: WebAssembly.Module;
  export default module;
}
