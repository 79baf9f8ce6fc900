// Node: large Buffer copies (the C library's memcpy, interposed when
// preloaded), then a WebAssembly out-of-bounds load, which V8 turns into
// a RuntimeError through its SIGSEGV trap handler, three times.
const n = 64 << 20;
const a = Buffer.alloc(n, 1);
const b = Buffer.allocUnsafe(n);
a.copy(b);
console.log("OUTCOME copied " + b[n - 1]);
// (module (memory 1) (func (export "f") (result i32) i32.const 70000 i32.load))
const bytes = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
  0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7f,
  0x03, 0x02, 0x01, 0x00,
  0x05, 0x03, 0x01, 0x00, 0x01,
  0x07, 0x05, 0x01, 0x01, 0x66, 0x00, 0x00,
  0x0a, 0x0b, 0x01, 0x09, 0x00, 0x41, 0xf0, 0xa2, 0x04, 0x28, 0x02, 0x00, 0x0b,
]);
const f = new WebAssembly.Instance(new WebAssembly.Module(bytes)).exports.f;
for (let i = 0; i < 3; i++) {
  try {
    f();
    console.log("OUTCOME no trap");
  } catch (e) {
    console.log("OUTCOME trap " + e.constructor.name);
  }
  a.copy(b);
}
