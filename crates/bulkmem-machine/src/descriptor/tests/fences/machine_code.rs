//! The store fence, checked in the machine code: a non-temporal kernel
//! whose `sfence` went missing still copies and clears correctly on one
//! core, so no behavioural test (tests/ordering.rs included) can see it.
//! These tests disassemble the functions the library really hands out (the
//! descriptor table's pointers, the public fills) from this test binary and
//! follow every path from a non-temporal store to a return.
//!
//! Function bounds come from the binary's own symbol table (`st_value`,
//! `st_size`), not from "decode until a `ret`": a kernel may return from
//! the middle and keep more code after it, and padding is not guaranteed.
//! Within those bounds the decode follows control flow from the entry, so
//! padding and data are never decoded as code (a linear sweep only serves
//! to recognise a jump-table dispatch, whose table is then read).
//!
//! The analysis, per path: a state `dirty` (a weakly ordered store issued
//! since the last `sfence`/`mfence`). A `ret`, or a jump that leaves the
//! function (a tail call, whose own returns are ours), reached dirty is a
//! missing fence. Direct calls into the crate's own code (and `core_arch`,
//! the intrinsics) are followed with the caller's state and continue with
//! every state the callee can return in; one followed by `ud2` or by the
//! function's end never returns. Calls to other code (std; libc through
//! the GOT, also from a register or stack slot the GOT entry was loaded
//! into) leave the state as it was: they issue no weakly ordered stores of
//! ours. Any other call through a register or memory may be a kernel
//! without its fence (fills stream through such pointers): it leaves the
//! state dirty. Unwinding paths are not followed: a panic is no publication.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::ffi::c_void;
use std::sync::OnceLock;

pub use iced_x86::Register;
use iced_x86::{
    Decoder, DecoderOptions, FlowControl, Formatter, Instruction, InstructionInfoFactory,
    IntelFormatter, Mnemonic, OpAccess, OpKind,
};

/// Stores that bypass the cache or are otherwise weakly ordered: only a
/// fence orders them before later stores.
pub const WEAK_STORES: &[Mnemonic] = &[
    Mnemonic::Movnti,
    Mnemonic::Movntdq,
    Mnemonic::Vmovntdq,
    Mnemonic::Movntps,
    Mnemonic::Vmovntps,
    Mnemonic::Movntpd,
    Mnemonic::Vmovntpd,
    Mnemonic::Movntq,
    Mnemonic::Movntss,
    Mnemonic::Movntsd,
    Mnemonic::Maskmovq,
    Mnemonic::Maskmovdqu,
    Mnemonic::Vmaskmovdqu,
    Mnemonic::Clzero,
    Mnemonic::Movdiri,
    Mnemonic::Movdir64b,
];

/// A function of this binary: link-time address range and name.
pub struct Symbol {
    start: u64,
    end: u64,
    name: String,
    /// File offset of `start`.
    offset: usize,
}

/// This test binary's functions, read from its ELF symbol table.
pub struct Image {
    file: Vec<u8>,
    symbols: Vec<Symbol>,
    /// Runtime address minus link-time address (PIE load bias).
    bias: u64,
    /// `.got` and `.got.plt`: calls through them reach named functions.
    got: Vec<std::ops::Range<u64>>,
    /// Each section's link-time range and file offset.
    sections: Vec<(std::ops::Range<u64>, u64)>,
}

pub fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().unwrap())
}
pub fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}
pub fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

pub unsafe extern "C" fn first_bias(
    info: *mut libc::dl_phdr_info,
    _size: usize,
    data: *mut c_void,
) -> libc::c_int {
    // SAFETY: dl_iterate_phdr passes a valid info for the duration of the
    // call, and `data` is the &mut u64 given below; the first object it
    // reports is the main program.
    unsafe { *data.cast::<u64>() = (*info).dlpi_addr };
    1
}

impl Image {
    pub fn load() -> Image {
        let file = std::fs::read("/proc/self/exe").expect("read the test binary");
        assert_eq!(&file[..4], b"\x7fELF", "not an ELF binary");
        let (shoff, shentsize, shnum) = (
            u64_at(&file, 0x28) as usize,
            u16_at(&file, 0x3A) as usize,
            u16_at(&file, 0x3C) as usize,
        );
        let section = |i: usize| shoff + i * shentsize;
        let symtab = (0..shnum)
            .map(section)
            .find(|&s| u32_at(&file, s + 4) == 2) // SHT_SYMTAB
            .expect("the test binary keeps its symbol table (not stripped)");
        let names = u64_at(&file, section(u16_at(&file, 0x3E) as usize) + 24) as usize;
        let got = (0..shnum)
            .map(section)
            .filter(|&sh| {
                let n = &file[names + u32_at(&file, sh) as usize..];
                n.starts_with(b".got\0") || n.starts_with(b".got.plt\0")
            })
            .map(|sh| {
                let a = u64_at(&file, sh + 16);
                a..a + u64_at(&file, sh + 32)
            })
            .collect();
        let sections = (0..shnum)
            .map(section)
            .map(|sh| {
                let a = u64_at(&file, sh + 16);
                (a..a + u64_at(&file, sh + 32), u64_at(&file, sh + 24))
            })
            .collect();
        let strtab = section(u32_at(&file, symtab + 40) as usize);
        let str_off = u64_at(&file, strtab + 24) as usize;
        let (sym_off, sym_size) = (
            u64_at(&file, symtab + 24) as usize,
            u64_at(&file, symtab + 32) as usize,
        );
        let mut symbols = Vec::new();
        for s in (sym_off..sym_off + sym_size).step_by(24) {
            let (info, shndx) = (file[s + 4], u16_at(&file, s + 6) as usize);
            let (value, size) = (u64_at(&file, s + 8), u64_at(&file, s + 16));
            // STT_FUNC, defined here, with a size.
            if info & 0xf != 2 || shndx == 0 || shndx >= shnum || size == 0 {
                continue;
            }
            let sh = section(shndx);
            let (sh_addr, sh_offset) = (u64_at(&file, sh + 16), u64_at(&file, sh + 24));
            let name_at = str_off + u32_at(&file, s) as usize;
            let name_len = file[name_at..].iter().position(|&b| b == 0).unwrap();
            symbols.push(Symbol {
                start: value,
                end: value + size,
                name: String::from_utf8_lossy(&file[name_at..name_at + name_len]).into_owned(),
                offset: (sh_offset + (value - sh_addr)) as usize,
            });
        }
        symbols.sort_by_key(|s| (s.start, std::cmp::Reverse(s.end)));
        let mut bias = 0u64;
        // SAFETY: the callback matches dl_iterate_phdr's contract and only
        // writes through `data`, a live &mut u64.
        unsafe { libc::dl_iterate_phdr(Some(first_bias), (&raw mut bias).cast()) };
        Image {
            file,
            symbols,
            bias,
            got,
            sections,
        }
    }

    /// The function a call through GOT slot `slot` reaches, if `slot` is
    /// one: `Some(None)` for one outside this binary (libc).
    fn through_got(&self, slot: u64) -> Option<Option<u64>> {
        if !self.got.iter().any(|g| g.contains(&slot)) {
            return None;
        }
        let at = (slot + self.bias) as *const u64;
        // SAFETY: `at` is an aligned slot of this process's GOT, mapped
        // and relocated before main, for the process's whole life.
        let target = unsafe { at.read() }.wrapping_sub(self.bias);
        Some(self.symbol(target).map(|_| target))
    }

    /// The function containing link-time address `at`.
    fn symbol(&self, at: u64) -> Option<&Symbol> {
        let i = self.symbols.partition_point(|s| s.start <= at);
        self.symbols[..i].iter().rev().take(8).find(|s| at < s.end)
    }

    /// `name+0xoff` for messages.
    fn describe(&self, at: u64) -> String {
        match self.symbol(at) {
            Some(s) => format!("{}+{:#x}", s.name, at - s.start),
            None => format!("{at:#x}"),
        }
    }

    /// The instruction at `at` inside `sym`.
    fn decode(&self, sym: &Symbol, at: u64) -> Instruction {
        let from = sym.offset + (at - sym.start) as usize;
        let to = sym.offset + (sym.end - sym.start) as usize;
        let mut d = Decoder::with_ip(64, &self.file[from..to], at, DecoderOptions::NONE);
        let i = d.decode();
        assert!(!i.is_invalid(), "undecodable at {}", self.describe(at));
        i
    }

    /// Every instruction of `sym` in a linear sweep (x86-64 ELF keeps
    /// jump tables and constants out of `.text`, so the sweep stays in
    /// step).
    fn sweep(&self, sym: &Symbol) -> Vec<Instruction> {
        let bytes = &self.file[sym.offset..sym.offset + (sym.end - sym.start) as usize];
        Decoder::with_ip(64, bytes, sym.start, DecoderOptions::NONE)
            .into_iter()
            .collect()
    }

    /// The targets of `jmp` if it is LLVM's jump-table dispatch:
    /// `cmp i, n-1; ja ..; lea base, [rip+table]; movsxd r, [base + i*4];
    /// add r, base; jmp r` (a register so computed never holds a kernel).
    fn jump_table(&self, sym: &Symbol, jmp: &Instruction) -> Option<Vec<u64>> {
        let all = self.sweep(sym);
        let at = all.iter().position(|i| i.ip() == jmp.ip())?;
        let [lea, load, add] = [3, 2, 1].map(|k| at.checked_sub(k).map(|k| all[k]));
        let (lea, load, add) = (lea?, load?, add?);
        let r = jmp.op0_register();
        let base = load.memory_base();
        let shape = jmp.op0_kind() == OpKind::Register
            && lea.mnemonic() == Mnemonic::Lea
            && lea.op0_register() == base
            && lea.is_ip_rel_memory_operand()
            && load.mnemonic() == Mnemonic::Movsxd
            && load.op0_register() == r
            && load.memory_index_scale() == 4
            && add.mnemonic() == Mnemonic::Add
            && add.op0_register() == r
            && add.op1_kind() == OpKind::Register
            && add.op1_register() == base;
        if !shape {
            return None;
        }
        let index = load.memory_index().full_register();
        // The bound: the nearest `cmp index, imm` before the dispatch.
        let entries = all[..at - 3]
            .iter()
            .rev()
            .take(8)
            .find(|i| {
                i.mnemonic() == Mnemonic::Cmp
                    && i.op0_kind() == OpKind::Register
                    && i.op0_register().full_register() == index
            })
            .map(|c| c.immediate(1) + 1)
            .unwrap_or_else(|| panic!("unbounded jump table at {}", self.describe(jmp.ip())));
        let table = lea.ip_rel_memory_address();
        let (range, offset) = self.sections.iter().find(|(r, _)| r.contains(&table))?;
        let file_at = (offset + (table - range.start)) as usize;
        Some(
            (0..entries as usize)
                .map(|k| {
                    let e = u32_at(&self.file, file_at + 4 * k) as i32;
                    table.wrapping_add_signed(e.into())
                })
                .collect(),
        )
    }

    /// Analyses the function at runtime address `f` entered with `dirty`.
    pub fn check(&self, f: usize, dirty: bool) -> Report {
        let mut a = Analysis {
            image: self,
            memo: HashMap::new(),
            active: HashSet::new(),
            report: Report::default(),
            info: InstructionInfoFactory::new(),
        };
        let entry = f as u64 - self.bias;
        let sym = self
            .symbol(entry)
            .unwrap_or_else(|| panic!("no symbol at {entry:#x}"));
        a.report.entry = sym.name.clone();
        let exits = a.run(entry, dirty, true);
        a.report.clean_exit = exits.clean;
        a.report
    }
}

/// What one analysis found.
#[derive(Default, Debug)]
pub struct Report {
    pub entry: String,
    /// Weakly ordered stores on some path from the entry.
    pub weak_stores: BTreeSet<String>,
    /// Calls through pointers (each possibly an unfenced kernel).
    pub pointer_calls: BTreeSet<String>,
    pub fences: BTreeSet<String>,
    /// Returns (or exits) reached with a weakly ordered store unfenced,
    /// each with the store or pointer call that left it so.
    pub unfenced_exits: BTreeSet<String>,
    /// Some path returns with nothing left unfenced.
    pub clean_exit: bool,
}

#[derive(Clone, Copy, Default)]
pub struct Exits {
    clean: bool,
    dirty: bool,
}

impl Exits {
    fn add(&mut self, dirty: Option<u64>) {
        match dirty {
            Some(_) => self.dirty = true,
            None => self.clean = true,
        }
    }
}

pub struct Analysis<'i> {
    image: &'i Image,
    memo: HashMap<(u64, bool), Exits>,
    active: HashSet<(u64, bool)>,
    report: Report,
    info: InstructionInfoFactory,
}

/// Registers a call clobbers (System V: rax, rcx, rdx, rsi, rdi, r8-r11;
/// bits in iced's order from rax): their GOT provenance is lost.
pub const CALLER_SAVED: u16 = 0b0000_1111_1100_0111;

pub const fn bit64(r: Register) -> u16 {
    let i = r as u32;
    if i >= Register::RAX as u32 && i <= Register::R15 as u32 {
        1 << (i - Register::RAX as u32)
    } else {
        0
    }
}

/// The spill slot `[rsp + 8k]` (k < 64) memory operand `i` names.
pub fn slot(i: &Instruction) -> Option<u32> {
    let d = i.memory_displacement64();
    let plain = i.memory_base() == Register::RSP && i.memory_index() == Register::None;
    (plain && d.is_multiple_of(8) && d < 512).then_some((d / 8) as u32)
}

/// A general register's bit in a provenance mask (0 for others).
pub fn bit(r: Register) -> u16 {
    bit64(r.full_register())
}

/// The index of a general register in [`State::local`] (`None` for
/// others).
fn index(r: Register) -> Option<usize> {
    let b = bit(r);
    (b != 0).then(|| b.trailing_zeros() as usize)
}

/// One path's state at an instruction: the weakly ordered store (or
/// pointer call) not yet fenced, and the registers that hold a function
/// address loaded from the GOT (LLVM hoists `memcpy`'s into one for a loop
/// and calls through the register): `external` for functions outside this
/// binary, `local` (the link-time address, 0 for none) for this binary's
/// own, which a call from another crate of it may reach through the GOT.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct State {
    unfenced: Option<u64>,
    external: u16,
    local: [u64; 16],
    spills: u64,
}

impl Analysis<'_> {
    fn text(&self, i: &Instruction) -> String {
        let mut s = String::new();
        IntelFormatter::new().format(i, &mut s);
        let mut t = format!("{} `{s}`", self.image.describe(i.ip()));
        if i.is_jmp_near() || i.is_call_near() {
            t += &format!(" ({})", self.image.describe(i.near_branch_target()));
        }
        t
    }

    /// Whether calls into `name` are followed (the crate's own code and the
    /// intrinsics; the global_asm routines are named `bulkmem_*`).
    fn ours(name: &str) -> bool {
        name.contains("bulkmem") || name.contains("core_arch")
    }

    /// A call to `target` (None: outside this binary) with `dirty`: the
    /// states it can return in.
    fn call(&mut self, target: Option<u64>, dirty: bool) -> Exits {
        let image = self.image;
        match target {
            Some(t) if image.symbol(t).is_some_and(|s| Self::ours(&s.name)) => {
                self.run(t, dirty, false)
            }
            _ => {
                let mut e = Exits::default();
                e.add(dirty.then_some(0));
                e
            }
        }
    }

    /// Where a call or jump `i` through memory or a register goes:
    /// `Ok(target)` through the GOT (`None`: outside this binary), `Err`
    /// for a pointer that may hold anything.
    fn indirect(&self, i: &Instruction, state: &State) -> Result<Option<u64>, ()> {
        if i.op0_kind() == OpKind::Memory && i.is_ip_rel_memory_operand() {
            return self.image.through_got(i.ip_rel_memory_address()).ok_or(());
        }
        if i.op0_kind() == OpKind::Register && state.external & bit(i.op0_register()) != 0 {
            return Ok(None);
        }
        if let Some(&t) = index(i.op0_register()).and_then(|r| state.local.get(r)) {
            if i.op0_kind() == OpKind::Register && t != 0 {
                return Ok(Some(t));
            }
        }
        Err(())
    }

    /// The provenance after `i`: GOT loads mark their register, moves
    /// carry the mark to a register or a stack slot (`[rsp + 8k]`, k < 64:
    /// LLVM spills a hoisted `memcpy` address and reloads it) and back;
    /// any other write clears it, and a change of `rsp` clears the slots.
    fn provenance_after(&mut self, i: &Instruction, mut p: State) -> State {
        let marked = |p: &State, op: u32| match i.op_kind(op) {
            OpKind::Register => p.external & bit(i.op_register(op)) != 0,
            OpKind::Memory if i.is_ip_rel_memory_operand() => {
                self.image.through_got(i.ip_rel_memory_address()) == Some(None)
            }
            OpKind::Memory => slot(i).is_some_and(|k| p.spills & 1 << k != 0),
            _ => false,
        };
        let mov64 = i.mnemonic() == Mnemonic::Mov && i.memory_size().size() <= 8 && {
            let r = if i.op0_kind() == OpKind::Register {
                i.op0_register()
            } else {
                i.op1_register()
            };
            r.size() == 8
        };
        let carried = mov64 && marked(&p, 1);
        // This binary's function, loaded from its GOT slot or moved from a
        // register holding one.
        let local = match i.op_kind(1) {
            _ if !mov64 => 0,
            OpKind::Memory if i.is_ip_rel_memory_operand() => self
                .image
                .through_got(i.ip_rel_memory_address())
                .flatten()
                .unwrap_or(0),
            OpKind::Register => index(i.op_register(1)).map_or(0, |r| p.local[r]),
            _ => 0,
        };
        if i.op0_kind() == OpKind::Memory && i.memory_base() == Register::RSP {
            if let Some(k) = slot(i) {
                p.spills = p.spills & !(1 << k) | u64::from(carried) << k;
            }
        }
        for r in self.info.info(i).used_registers() {
            if !matches!(
                r.access(),
                OpAccess::Read | OpAccess::CondRead | OpAccess::NoMemAccess
            ) {
                p.external &= !bit(r.register());
                if let Some(k) = index(r.register()) {
                    p.local[k] = 0;
                }
                if r.register() == Register::RSP && !i.is_call_near() && !i.is_call_near_indirect()
                {
                    p.spills = 0;
                }
            }
        }
        if carried && i.op0_kind() == OpKind::Register {
            p.external |= bit(i.op0_register());
        }
        if let (Some(k), OpKind::Register) = (index(i.op0_register()), i.op0_kind()) {
            if local != 0 {
                p.local[k] = local;
            }
        }
        p
    }

    /// Explores the function containing `entry` from `entry`; only the
    /// root's exits are reported (a callee may return dirty).
    fn run(&mut self, entry: u64, dirty: bool, root: bool) -> Exits {
        let key = (entry, dirty);
        if let Some(e) = self.memo.get(&key) {
            return *e;
        }
        if !self.active.insert(key) {
            // Recursion: assume the state passes through (a fence inside
            // would only make paths cleaner).
            let mut e = Exits::default();
            e.add(dirty.then_some(entry));
            return e;
        }
        let image = self.image;
        let sym = image.symbol(entry).expect("call target has a symbol");
        let inside = |a: u64| (sym.start..sym.end).contains(&a);
        // A call that ends the function or is followed by `ud2` never
        // returns (LLVM places nothing after such calls).
        let returns = |next: u64| {
            inside(next) && image.decode(sym, next).flow_control() != FlowControl::Exception
        };
        let mut exits = Exits::default();
        let mut seen = HashSet::new();
        let mut work = vec![(
            entry,
            State {
                unfenced: dirty.then_some(entry),
                external: 0,
                local: [0; 16],
                spills: 0,
            },
        )];
        while let Some((ip, state)) = work.pop() {
            if !seen.insert((
                ip,
                state.unfenced.is_some(),
                state.external,
                state.local,
                state.spills,
            )) {
                continue;
            }
            let i = image.decode(sym, ip);
            let next = i.next_ip();
            let mut exit = |a: &mut Self, s: Option<u64>, at: &Instruction| {
                if let (Some(from), true) = (s, root) {
                    let msg = format!("{} after {}", a.text(at), image.describe(from));
                    a.report.unfenced_exits.insert(msg);
                }
                exits.add(s);
            };
            let after = self.provenance_after(&i, state);
            let mut called = State {
                external: after.external & !CALLER_SAVED,
                ..after
            };
            for (k, t) in called.local.iter_mut().enumerate() {
                if CALLER_SAVED & 1 << k != 0 {
                    *t = 0;
                }
            }
            let go = |s: Option<u64>, work: &mut Vec<(u64, State)>, base: State| {
                work.push((
                    next,
                    State {
                        unfenced: s,
                        ..base
                    },
                ))
            };
            if WEAK_STORES.contains(&i.mnemonic()) {
                self.report.weak_stores.insert(self.text(&i));
                go(Some(ip), &mut work, after);
                continue;
            }
            if matches!(i.mnemonic(), Mnemonic::Sfence | Mnemonic::Mfence) {
                self.report.fences.insert(self.text(&i));
                go(None, &mut work, after);
                continue;
            }
            match i.flow_control() {
                FlowControl::Next | FlowControl::XbeginXabortXend => work.push((next, after)),
                FlowControl::Return => exit(self, state.unfenced, &i),
                FlowControl::Interrupt if i.mnemonic() != Mnemonic::Int3 => {
                    work.push((next, after))
                }
                FlowControl::Interrupt | FlowControl::Exception => {}
                FlowControl::ConditionalBranch | FlowControl::UnconditionalBranch => {
                    if i.flow_control() == FlowControl::ConditionalBranch {
                        work.push((next, after));
                    }
                    let t = i.near_branch_target();
                    if inside(t) {
                        work.push((t, after));
                    } else {
                        // A tail call: its returns are this function's.
                        let e = self.call(Some(t), state.unfenced.is_some());
                        if e.dirty {
                            exit(self, state.unfenced.or(Some(ip)), &i);
                        }
                        if e.clean {
                            exit(self, None, &i);
                        }
                    }
                }
                _ if (i.is_call_near() || i.is_call_near_indirect()) && !returns(next) => {}
                FlowControl::Call | FlowControl::IndirectCall => {
                    let target = match i.flow_control() {
                        FlowControl::Call => Ok(Some(i.near_branch_target())),
                        _ => self.indirect(&i, &state),
                    };
                    let Ok(target) = target else {
                        self.report.pointer_calls.insert(self.text(&i));
                        go(Some(ip), &mut work, called);
                        continue;
                    };
                    let e = self.call(target, state.unfenced.is_some());
                    if e.dirty {
                        go(state.unfenced.or(Some(ip)), &mut work, called);
                    }
                    if e.clean {
                        go(None, &mut work, called);
                    }
                }
                FlowControl::IndirectBranch => match self.indirect(&i, &state) {
                    Ok(t) => {
                        let e = self.call(t, state.unfenced.is_some());
                        if e.dirty {
                            exit(self, state.unfenced.or(Some(ip)), &i);
                        }
                        if e.clean {
                            exit(self, None, &i);
                        }
                    }
                    Err(()) => match image.jump_table(sym, &i) {
                        Some(targets) => {
                            for t in targets {
                                assert!(inside(t), "jump table leaves {}", sym.name);
                                work.push((t, after));
                            }
                        }
                        None => {
                            // A tail call through a pointer, maybe to a kernel
                            // without its fence.
                            self.report.pointer_calls.insert(self.text(&i));
                            exit(self, Some(ip), &i);
                        }
                    },
                },
            }
        }
        self.active.remove(&key);
        self.memo.insert(key, exits);
        exits
    }
}

impl Image {
    /// Whether runtime address `at` lies in the function that starts
    /// at runtime address `f`.
    pub fn in_function(&self, f: usize, at: usize) -> bool {
        let (f, at) = (f as u64 - self.bias, at as u64 - self.bias);
        self.symbol(f)
            .is_some_and(|s| s.start == f && (s.start..s.end).contains(&at))
    }
}

pub fn image() -> &'static Image {
    static IMAGE: OnceLock<Image> = OnceLock::new();
    IMAGE.get_or_init(Image::load)
}

pub fn lines(set: &BTreeSet<String>) -> String {
    set.iter().cloned().collect::<Vec<_>>().join("\n")
}
