// The DRAM behind the accelerator's AXI4 master port, as docs/timing.md defines it.
//
// Fixed latency L, one burst at a time, one beat per cycle: the data of a read burst whose AR
// handshake is in cycle a starts in cycle max(a + L, end of the previous burst); a write burst
// accepted (AW) in cycle a gets its B response in cycle max(a + L, end of the previous burst)
// + beats - 1 (never before its last W beat). Reads and writes share one port timeline.
// The same model as hw/cosim/dram_model.py (cocotb), without any per-cycle Python.
#pragma once

#include <cstdint>
#include <cstring>
#include <deque>

struct DramModel {
    // What the DUT drives in one (sampled) cycle.
    struct Sample {
        bool arvalid, awvalid, wvalid;
        uint64_t araddr, awaddr;
        unsigned arlen, awlen;
        const uint8_t* wdata;  // bus_bytes bytes
        uint64_t wstrb;
    };
    // What the model drives in the next cycle.
    struct Drive {
        bool rvalid, rlast, bvalid;
        const uint8_t* rdata;  // bus_bytes bytes, valid while rvalid
    };

    struct Read { uint64_t first, addr, beats; };
    struct Write { uint64_t addr, beats, received, bcycle; };

    uint8_t* mem = nullptr;
    uint64_t size = 0;
    uint64_t base = 0;  // the AXI address of mem[0] (a physical base for the pynq shim; 0 for run images)
    unsigned L, B;
    uint64_t k = 0;           // the sampled cycle
    uint64_t busy_until = 0;  // first cycle the port's data timeline is free
    std::deque<Read> reads;
    std::deque<Write> writes;
    std::deque<uint64_t> bq;  // pending B cycles
    bool cur_active = false;
    uint64_t cur_addr = 0, cur_left = 0;
    uint8_t beat[64];
    uint64_t oob = 0;  // bytes touched outside the image (reads give 0, writes are dropped)

    DramModel(unsigned latency, unsigned bus_bytes) : L(latency), B(bus_bytes) {}

    void attach(uint8_t* m, uint64_t n, uint64_t at = 0) {
        mem = m; size = n; base = at; k = 0; busy_until = 0; oob = 0;
        reads.clear(); writes.clear(); bq.clear(); cur_active = false;
    }

    void read_beat(uint64_t addr) {
        if (addr + B <= size) { std::memcpy(beat, mem + addr, B); return; }
        for (unsigned i = 0; i < B; ++i) {
            bool in = addr + i < size;
            beat[i] = in ? mem[addr + i] : 0;
            oob += !in;
        }
    }

    void write_beat(uint64_t addr, const uint8_t* data, uint64_t strb) {
        uint64_t full = B >= 64 ? ~0ull : ((1ull << B) - 1);
        if (strb == full && addr + B <= size) { std::memcpy(mem + addr, data, B); return; }
        for (unsigned i = 0; i < B; ++i) {
            if (!((strb >> i) & 1)) continue;
            if (addr + i < size) mem[addr + i] = data[i]; else ++oob;
        }
    }

    // Consume the DUT's outputs of cycle k and return the inputs for cycle k + 1.
    Drive step(const Sample& s) {
        if (s.arvalid) {
            uint64_t beats = s.arlen + 1, first = k + L > busy_until ? k + L : busy_until;
            busy_until = first + beats;
            reads.push_back({first, s.araddr - base, beats});  // below base: wraps, out of the image
        }
        if (s.awvalid) {
            uint64_t beats = s.awlen + 1, first = k + L > busy_until ? k + L : busy_until;
            busy_until = first + beats;
            writes.push_back({s.awaddr - base, beats, 0, first + beats - 1});
        }
        if (s.wvalid && !writes.empty()) {  // W beats come in burst order
            Write& w = writes.front();
            write_beat(w.addr + w.received * B, s.wdata, s.wstrb);
            if (++w.received == w.beats) {
                bq.push_back(w.bcycle > k + 1 ? w.bcycle : k + 1);
                writes.pop_front();
            }
        }
        Drive d{false, false, false, beat};
        if (!bq.empty() && bq.front() == k + 1) { d.bvalid = true; bq.pop_front(); }
        if (!cur_active && !reads.empty() && reads.front().first == k + 1) {
            cur_active = true; cur_addr = reads.front().addr; cur_left = reads.front().beats;
            reads.pop_front();
        }
        if (cur_active) {
            read_beat(cur_addr);
            d.rvalid = true;
            d.rlast = cur_left == 1;
            cur_addr += B;
            if (--cur_left == 0) cur_active = false;
        }
        ++k;
        return d;
    }
};
