// The compiled co-simulation test bench: the Verilated accelerator top (vta_top), the DRAM model of
// docs/timing.md (dram_model.h) and an AXI4-Lite master for the register file, all in C++.
//
// Usage: vta_harness <dram_latency> <bus_bytes>
// One process serves many commands, one per line on stdin, each answered by one line on stdout:
//   run <image path> <image bytes> <insn_addr> <n_insns> <max_cycles>
//       resets the design (scratchpads keep their contents), maps the DRAM image file (shared, so the
//       caller sees the final image in the same file), programs INSN_ADDR/INSN_COUNT/CTRL, serves DRAM
//       until irq, reads CYCLES -> "ok <cycles> <timed out 0|1> <bench cycles> <out-of-image bytes>"
//   wr <reg offset> <value>  -> "ok"              (AXI4-Lite write, DRAM served meanwhile)
//   rd <reg offset>          -> "ok <value>"      (AXI4-Lite read)
//   reset                    -> "ok"              (two cycles of rst)
//   map <path> <bytes> <base> -> "ok"             (serve DRAM from the file at AXI address base; no reset)
//   runirq <max_cycles>      -> "ok <irq> <cycles run> <out-of-image bytes>"  (run until the irq of the run
//                               started last: irq seen low since that CTRL start write, then high; or max_cycles)
//   step <n>                 -> "ok <irq>"        (n clock cycles, DRAM served from the last mapped image)
//   quit
// Errors answer "err <message>". Only top-level ports are driven: the bench is generic over the design.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "Vvta_top.h"
#include "Vvta_top___024root.h"
#include "dram_model.h"
#include "verilated.h"

// ---- one eval per clock cycle where the Verilated model allows it
// Verilator detects a rising edge by comparing clk with the value it saw at the previous eval. Holding
// clk at 1 and clearing that remembered value makes the next eval a rising edge without a separate
// falling-edge eval (which would only re-settle the combinational logic). Used when this Verilator's
// model has the member; otherwise the bench toggles clk with two evals per cycle.
template <class R, class = void> struct HasClkPrev : std::false_type {};
template <class R>
struct HasClkPrev<R, std::void_t<decltype(std::declval<R&>().__Vtrigprevexpr___TOP__clk__0)>> : std::true_type {};

template <class R> static inline void arm_edge(R* root) {
    if constexpr (HasClkPrev<R>::value) root->__Vtrigprevexpr___TOP__clk__0 = 0;
}
static constexpr bool kOneEval = HasClkPrev<Vvta_top___024root>::value;

// With -DVTA_EDGE_PHASES (build.py tries it first and falls back without it when it does not link), a rising
// edge whose inputs did not change since the last evaluation runs only Verilator's active and NBA phases:
// the input-combinational phase would recompute exactly the values it already holds.
#ifdef VTA_EDGE_PHASES
bool Vvta_top___024root___eval_phase__act(Vvta_top___024root* vlSelf);
bool Vvta_top___024root___eval_phase__nba(Vvta_top___024root* vlSelf);
static inline void edge_phases(Vvta_top___024root* root) {
    do {
        while (Vvta_top___024root___eval_phase__act(root)) {
        }
    } while (Vvta_top___024root___eval_phase__nba(root));
}
#endif

// ---- ports of any width (integral up to 64 bits, VlWide above) as little-endian bytes
template <class T> static inline void put_bytes(T& port, const uint8_t* src, unsigned n) {
    uint64_t v = 0;
    std::memcpy(&v, src, n < 8 ? n : 8);
    port = static_cast<T>(v);
}
template <std::size_t N> static inline void put_bytes(VlWide<N>& port, const uint8_t* src, unsigned n) {
    for (std::size_t i = 0; i < N; ++i) {
        uint32_t w = 0;
        if (4 * i < n) std::memcpy(&w, src + 4 * i, n - 4 * i < 4 ? n - 4 * i : 4);
        port[i] = w;
    }
}
template <class T> static inline void get_bytes(const T& port, uint8_t* dst, unsigned n) {
    uint64_t v = static_cast<uint64_t>(port);
    std::memcpy(dst, &v, n < 8 ? n : 8);
}
template <std::size_t N> static inline void get_bytes(const VlWide<N>& port, uint8_t* dst, unsigned n) {
    for (std::size_t i = 0; i < N && 4 * i < n; ++i) {
        uint32_t w = port[i];
        std::memcpy(dst + 4 * i, &w, n - 4 * i < 4 ? n - 4 * i : 4);
    }
}

struct Bench {
    std::unique_ptr<VerilatedContext> ctx;
    std::unique_ptr<Vvta_top> top;
    DramModel dram;
    unsigned B;
    uint8_t wbuf[64];
    bool axil_awready = false, axil_arready = false, axil_rvalid = false, irq = false;
    uint32_t axil_rdata = 0;
    uint8_t* map = nullptr;
    uint64_t map_size = 0;
    bool settled = false;  // outputs reflect the current inputs (one-eval mode)
    bool irq_low_since_start = true;  // runirq: irq was seen low after the last CTRL start write

    Bench(unsigned latency, unsigned bus_bytes) : ctx(new VerilatedContext), dram(latency, bus_bytes), B(bus_bytes) {
        top.reset(new Vvta_top(ctx.get()));
        top->clk = kOneEval ? 1 : 0;
        top->rst = 0;
        top->m_axi_arready = 1;
        top->m_axi_awready = 1;
        top->m_axi_wready = 1;
        top->m_axi_rvalid = 0;
        top->m_axi_bvalid = 0;
        top->m_axi_rresp = 0;
        top->m_axi_bresp = 0;
        top->m_axi_rlast = 0;
        top->s_axil_awvalid = 0;
        top->s_axil_wvalid = 0;
        top->s_axil_arvalid = 0;
        top->s_axil_bready = 1;
        top->s_axil_rready = 1;
        top->eval();
    }

    // The DRAM-driven inputs (rvalid, rlast, rdata, bvalid) go through registers of the bench's Verilog wrapper
    // (build.py): the values for cycle k + 1 are computed from cycle k's outputs and written before the edge of
    // cycle k, which moves them into the design. No input-combinational evaluation is needed for them.
    inline void cycle() {
        if (!settled) {  // AXI4-Lite / reset inputs changed since the last edge
            top->clk = kOneEval ? 1 : 0;
            top->eval();
        }
        DramModel::Sample s;
        s.arvalid = top->m_axi_arvalid;
        s.awvalid = top->m_axi_awvalid;
        s.wvalid = top->m_axi_wvalid;
        s.araddr = top->m_axi_araddr;
        s.awaddr = top->m_axi_awaddr;
        s.arlen = top->m_axi_arlen;
        s.awlen = top->m_axi_awlen;
        if (s.wvalid) get_bytes(top->m_axi_wdata, wbuf, B);
        s.wdata = wbuf;
        s.wstrb = static_cast<uint64_t>(top->m_axi_wstrb);
        axil_awready = top->s_axil_awready;
        axil_arready = top->s_axil_arready;
        axil_rvalid = top->s_axil_rvalid;
        axil_rdata = top->s_axil_rdata;
        irq = top->irq;
        irq_low_since_start |= !irq;
        DramModel::Drive d = dram.step(s);
        top->m_axi_rvalid = d.rvalid;
        top->m_axi_rlast = d.rlast;
        top->m_axi_bvalid = d.bvalid;
        if (d.rvalid) put_bytes(top->m_axi_rdata, d.rdata, B);
        if (kOneEval) {
            arm_edge(top->rootp);
#ifdef VTA_EDGE_PHASES
            edge_phases(top->rootp);
#else
            top->eval();
#endif
        } else {
            top->clk = 0;
            top->eval();
            top->clk = 1;
            top->eval();
        }
        settled = true;
    }

    void axil_write(uint32_t addr, uint32_t value) {
        top->s_axil_awaddr = addr;
        top->s_axil_wdata = value;
        top->s_axil_wstrb = 0xF;
        top->s_axil_awvalid = 1;
        top->s_axil_wvalid = 1;
        settled = false;
        do cycle(); while (!axil_awready);
        top->s_axil_awvalid = 0;
        top->s_axil_wvalid = 0;
        settled = false;
    }

    uint32_t axil_read(uint32_t addr) {
        top->s_axil_araddr = addr;
        top->s_axil_arvalid = 1;
        settled = false;
        do cycle(); while (!axil_arready);
        top->s_axil_arvalid = 0;
        settled = false;
        do cycle(); while (!axil_rvalid);
        return axil_rdata;
    }

    void reset() {
        top->rst = 1;
        settled = false;
        cycle();
        cycle();
        top->rst = 0;
        settled = false;
    }

    void unmap() {
        if (map) munmap(map, map_size);
        map = nullptr;
        map_size = 0;
        dram.attach(nullptr, 0);
    }

    std::string mapfile(const char* path, uint64_t nbytes, uint64_t base = 0) {
        unmap();
        if (nbytes == 0) return "";
        int fd = open(path, O_RDWR);
        if (fd < 0) return std::string("cannot open ") + path;
        struct stat st;
        if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < nbytes) {
            close(fd);
            return std::string("image file shorter than its size: ") + path;
        }
        void* p = mmap(nullptr, nbytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        if (p == MAP_FAILED) return std::string("cannot map ") + path;
        map = static_cast<uint8_t*>(p);
        map_size = nbytes;
        dram.attach(map, nbytes, base);
        return "";
    }
};

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s <dram_latency> <bus_bytes>\n", argv[0]);
        return 2;
    }
    Verilated::commandArgs(1, argv);
    Bench b(static_cast<unsigned>(std::atoi(argv[1])), static_cast<unsigned>(std::atoi(argv[2])));
    char line[4352];
    while (std::fgets(line, sizeof line, stdin)) {
        char cmd[16] = {0};
        if (std::sscanf(line, "%15s", cmd) != 1) continue;
        std::string c(cmd);
        if (c == "quit") break;
        if (c == "run") {
            char path[4096];
            unsigned long long nbytes, addr, n, limit;
            if (std::sscanf(line, "run %4095s %llu %llu %llu %llu", path, &nbytes, &addr, &n, &limit) != 5) {
                std::printf("err bad run command\n");
            } else {
                std::string e = b.mapfile(path, nbytes);
                if (!e.empty()) {
                    std::printf("err %s\n", e.c_str());
                } else {
                    b.reset();
                    b.axil_write(0x04, static_cast<uint32_t>(addr));
                    b.axil_write(0x08, static_cast<uint32_t>(n));
                    b.axil_write(0x00, 1);
                    unsigned long long k = 0;
                    bool done = false;
                    while (true) {
                        b.cycle();
                        if (b.irq) { done = true; break; }
                        if (++k >= limit) break;
                    }
                    uint32_t cycles = done ? b.axil_read(0x0C) : 0;
                    std::printf("ok %lld %d %llu %llu\n", done ? static_cast<long long>(cycles) : -1LL, done ? 0 : 1,
                                k, static_cast<unsigned long long>(b.dram.oob));
                }
            }
        } else if (c == "wr") {
            unsigned a, v;
            if (std::sscanf(line, "wr %u %u", &a, &v) != 2) std::printf("err bad wr command\n");
            else {
                b.axil_write(a, v);
                if (a == 0x00 && (v & 1)) b.irq_low_since_start = false;  // CTRL start: the old irq is stale
                std::printf("ok\n");
            }
        } else if (c == "rd") {
            unsigned a;
            if (std::sscanf(line, "rd %u", &a) != 1) std::printf("err bad rd command\n");
            else std::printf("ok %u\n", b.axil_read(a));
        } else if (c == "map") {
            char path[4096];
            unsigned long long nbytes, base;
            if (std::sscanf(line, "map %4095s %llu %llu", path, &nbytes, &base) != 3) {
                std::printf("err bad map command\n");
            } else {
                std::string e = b.mapfile(path, nbytes, base);
                if (e.empty()) std::printf("ok\n"); else std::printf("err %s\n", e.c_str());
            }
        } else if (c == "runirq") {
            unsigned long long limit, k = 0;
            if (std::sscanf(line, "runirq %llu", &limit) != 1) {
                std::printf("err bad runirq command\n");
            } else {
                bool fired = b.irq && b.irq_low_since_start;
                while (!fired && k < limit) {
                    b.cycle();
                    ++k;
                    fired = b.irq && b.irq_low_since_start;
                }
                std::printf("ok %d %llu %llu\n", fired ? 1 : 0, k, static_cast<unsigned long long>(b.dram.oob));
            }
        } else if (c == "reset") {
            b.reset();
            std::printf("ok\n");
        } else if (c == "step") {
            unsigned long long n;
            if (std::sscanf(line, "step %llu", &n) != 1) std::printf("err bad step command\n");
            else { for (unsigned long long i = 0; i < n; ++i) b.cycle(); std::printf("ok %d\n", b.irq ? 1 : 0); }
        } else {
            std::printf("err unknown command %s\n", cmd);
        }
        std::fflush(stdout);
    }
    b.unmap();
    b.top->final();
    return 0;
}
