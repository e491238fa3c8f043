// The real-kernel scenarios. Each runs against a fresh reactor for the given variant.

import Foundation
import Glibc
import XCTest
@testable import PushcastReactor

enum Scenarios {
    /// 1. A listener and a client in one reactor: the client sends "hello", the server echoes it.
    static func loopbackEcho(_ variant: Variant, host: String = "127.0.0.1") throws {
        let reactor = try Reactor(configuration: variant.configuration())
        XCTAssertEqual(reactor.backendKind, variant.isURing ? .uring : .epoll)
        let (listener, port) = try reactor.listen(host: host, port: 0)
        XCTAssertNotEqual(port, 0)
        let client = try reactor.connect(host: host, port: port)
        var server: Slot?
        var clientReceived: [UInt8] = []
        var serverReceived: [UInt8] = []
        var connected = false
        try reactor.pump("the echo of hello", until: { clientReceived.count >= 5 }) { event in
            switch event {
            case .connected(let slot):
                XCTAssertEqual(slot, client)
                connected = true
                XCTAssertEqual(reactor.stage(slot, bytes: Array("hello".utf8)[...]), 5)
                XCTAssertEqual(reactor.stagedBytes(slot), 5)
            case .accepted(let from, let connection):
                XCTAssertEqual(from, listener)
                XCTAssertNil(server, "one connection expected")
                server = connection
            case .received(let slot, let bytes):
                if slot == server {
                    serverReceived += bytes
                    XCTAssertEqual(reactor.stage(slot, bytes: Array(bytes)[...]), bytes.count)
                } else {
                    XCTAssertEqual(slot, client)
                    clientReceived += bytes
                }
            case .writable(let slot):
                XCTAssertEqual(reactor.stagedBytes(slot), 0)
            case .connectFailed, .closed, .timer:
                XCTFail("unexpected \(RecordedEvent(event))")
            }
        }
        XCTAssertTrue(connected)
        XCTAssertEqual(String(decoding: serverReceived, as: UTF8.self), "hello")
        XCTAssertEqual(String(decoding: clientReceived, as: UTF8.self), "hello")
        XCTAssertEqual(reactor.slotsInUse, 3)

        // Closing the client gives the server an orderly EOF; its slot is freed after the handler.
        reactor.close(client)
        var serverClosed: Int32?
        try reactor.pump("the server side to see EOF", until: { serverClosed != nil }) { event in
            // The echo's send may complete in a later batch than the one its bytes arrived in.
            if case .writable(let slot) = event, slot == server { return }
            guard case .closed(let slot, let code) = event else { return XCTFail("unexpected \(RecordedEvent(event))") }
            XCTAssertEqual(slot, server)
            serverClosed = code
        }
        XCTAssertEqual(serverClosed, 0)
        try reactor.pump("the slots to be freed", until: { reactor.slotsInUse == 1 }) { event in
            XCTFail("unexpected \(RecordedEvent(event))")
        }
    }

    /// 2. One MiB of random bytes echoed intact, staged in pieces smaller and larger than the
    /// staging capacity, with small provided buffers so receive buffers run short too.
    static func bulkEcho(_ variant: Variant) throws {
        let reactor = try Reactor(configuration: variant.configuration { configuration in
            configuration.sendBufferBytes = 48 * 1024
            configuration.receiveBufferBytes = 4096
            configuration.receiveBufferCount = 4
        })
        let payload = randomBytes(1 << 20, seed: 0xC0FFEE)
        let (_, port) = try reactor.listen(host: "127.0.0.1", port: 0)
        let client = try reactor.connect(host: "127.0.0.1", port: port)
        var clientOutbox = Outbox()
        clientOutbox.chunkSizes = [1000, 100_000, 7, 48 * 1024 + 1, 3333]
        clientOutbox.append(payload)
        var serverOutbox = Outbox()
        var server: Slot?
        var echoed: [UInt8] = []
        echoed.reserveCapacity(payload.count)
        var clientWritable = 0
        try reactor.pump(seconds: 30, "1 MiB to come back", until: { echoed.count >= payload.count }) { event in
            switch event {
            case .connected(let slot):
                clientOutbox.flush(reactor, slot)
                XCTAssertLessThanOrEqual(reactor.stagedBytes(slot), 48 * 1024)
            case .accepted(_, let connection):
                server = connection
            case .received(let slot, let bytes):
                if slot == server {
                    serverOutbox.append(bytes)
                    serverOutbox.flush(reactor, slot)
                } else {
                    echoed += bytes
                }
            case .writable(let slot):
                XCTAssertEqual(reactor.stagedBytes(slot), 0)
                XCTAssertEqual(reactor.stageCapacity(slot), 48 * 1024)
                if slot == client {
                    clientWritable += 1
                    clientOutbox.flush(reactor, slot)
                } else {
                    serverOutbox.flush(reactor, slot)
                }
            case .connectFailed, .closed, .timer:
                XCTFail("unexpected \(RecordedEvent(event))")
            }
        }
        XCTAssertEqual(echoed.count, payload.count)
        XCTAssertTrue(echoed == payload, "echoed bytes differ from the payload")
        XCTAssertTrue(clientOutbox.isEmpty)
        XCTAssertGreaterThan(clientOutbox.shortStages, 0, "staging never filled up: back-pressure not exercised")
        XCTAssertGreaterThan(clientWritable, 0)
    }

    /// 3. Timers fire in deadline order and never before their deadline.
    static func timersInDeadlineOrder(_ variant: Variant) throws {
        let reactor = try Reactor(configuration: variant.configuration())
        let start = Reactor.nowNanoseconds()
        let offsetsMilliseconds: [UInt64] = [40, 10, 50, 20, 30]
        var deadlines: [UInt64: UInt64] = [:]
        for offset in offsetsMilliseconds {
            deadlines[offset] = start + offset * 1_000_000
            reactor.scheduleTimer(id: offset, deadlineNanoseconds: start + offset * 1_000_000)
        }
        // A later timer with the same deadline as another fires after it.
        reactor.scheduleTimer(id: 99, deadlineNanoseconds: start + 30 * 1_000_000)
        deadlines[99] = start + 30 * 1_000_000
        var fired: [UInt64] = []
        try reactor.poll(timeoutNanoseconds: 0) { event in
            XCTFail("nothing is due yet: \(RecordedEvent(event))")
        }
        try reactor.pump(seconds: 5, "six timers", until: { fired.count == 6 }) { event in
            guard case .timer(let id) = event else { return XCTFail("unexpected \(RecordedEvent(event))") }
            let now = Reactor.nowNanoseconds()
            XCTAssertGreaterThanOrEqual(now, deadlines[id]!, "timer \(id) fired early")
            fired.append(id)
        }
        XCTAssertEqual(fired, [10, 20, 30, 99, 40, 50])

        // A far timer doesn't fire during a wait that ends before it; the wait honours the timeout.
        reactor.scheduleTimer(id: 7, deadlineNanoseconds: Reactor.nowNanoseconds() + 300_000_000)
        let waitStart = Reactor.nowNanoseconds()
        try reactor.poll(timeoutNanoseconds: 20_000_000) { event in
            XCTFail("the timer is 300 ms away: \(RecordedEvent(event))")
        }
        let waited = Reactor.nowNanoseconds() - waitStart
        XCTAssertGreaterThanOrEqual(waited, 19_000_000)
        XCTAssertLessThan(waited, 250_000_000)
        var sevenFired = false
        try reactor.pump(seconds: 5, "timer 7", until: { sevenFired }) { event in
            guard case .timer(7) = event else { return XCTFail("unexpected \(RecordedEvent(event))") }
            sevenFired = true
        }
        XCTAssertGreaterThanOrEqual(Reactor.nowNanoseconds() - waitStart, 300_000_000)
    }

    /// 4. A slot closed while its connect is in flight is reused with a new generation; nothing
    /// for the old generation is ever delivered, and the new occupant works.
    static func staleCompletionIgnored(_ variant: Variant) throws {
        let reactor = try Reactor(configuration: variant.configuration())
        let (_, port) = try reactor.listen(host: "127.0.0.1", port: 0)
        let refusedPort = try unusedLoopbackPort()
        let old = try reactor.connect(host: "127.0.0.1", port: refusedPort)
        // Closed before the connect was even submitted: its completion must be dropped.
        reactor.close(old)
        XCTAssertEqual(reactor.stage(old, bytes: [1, 2, 3][...]), 0, "a closed slot takes no bytes")
        XCTAssertEqual(reactor.stageCapacity(old), 0)
        var events: [RecordedEvent] = []
        let record: (ReactorEvent) -> Void = { events.append(RecordedEvent($0)) }
        try reactor.pump("the closed slot to be freed", until: { reactor.slotsInUse == 1 }, record)
        if variant.isURing {
            XCTAssertGreaterThanOrEqual(reactor.staleCompletionsDropped, 1, "the connect's completion was not seen")
        }

        let new = try reactor.connect(host: "127.0.0.1", port: port)
        XCTAssertEqual(new.index, old.index, "the freed slot is reused")
        XCTAssertNotEqual(new.generation, old.generation)
        var server: Slot?
        var received: [UInt8] = []
        try reactor.pump("the new slot to connect", until: { server != nil && events.contains(.connected(new)) }) { event in
            record(event)
            if case .accepted(_, let connection) = event { server = connection }
        }
        // A completion carrying the old generation (as a late kernel completion would) is dropped.
        let droppedBefore = reactor.staleCompletionsDropped
        reactor.injectStaleReceiveError(for: old, errno: ECONNRESET, record)
        XCTAssertEqual(reactor.staleCompletionsDropped, droppedBefore + 1)

        XCTAssertEqual(reactor.stage(new, bytes: Array("ping".utf8)[...]), 4)
        try reactor.pump("ping on the new slot", until: { received.count == 4 }) { event in
            record(event)
            if case .received(let slot, let bytes) = event, slot == server { received += bytes }
        }
        XCTAssertEqual(String(decoding: received, as: UTF8.self), "ping")
        for event in events {
            XCTAssertFalse(event.slots.contains(old), "event for the stale slot: \(event)")
        }
        XCTAssertFalse(events.contains { if case .closed = $0 { return true } else { return false } })
        XCTAssertTrue(events.contains(.connected(new)))
    }

    /// 6. A waker wakes a poll blocked with no timeout, from another thread, repeatedly.
    static func wakerWakesBlockedPoll(_ variant: Variant) throws {
        let reactor = try Reactor(configuration: variant.configuration())
        let waker = try reactor.makeWaker()
        XCTAssertTrue(waker === (try reactor.makeWaker()))
        for round in 0..<2 {
            let start = Reactor.nowNanoseconds()
            let thread = Thread {
                // usleep can end early on a signal; sleep until 100 ms have really passed.
                while Reactor.nowNanoseconds() - start < 100_000_000 { usleep(10_000) }
                waker.wake()
            }
            thread.start()
            // A signal may end a turn early (EINTR), so keep polling until the wake is due. Ten
            // seconds is a fail-safe: if the wake did not end the wait, the turn lasts that long.
            repeat {
                try reactor.poll(timeoutNanoseconds: 10_000_000_000) { event in
                    XCTFail("unexpected \(RecordedEvent(event))")
                }
            } while Reactor.nowNanoseconds() - start < 100_000_000
            let elapsed = Reactor.nowNanoseconds() - start
            XCTAssertLessThan(elapsed, 5_000_000_000, "round \(round): the wake did not end the wait")
        }
        // A wake that comes before the poll is not lost.
        waker.wake()
        let start = Reactor.nowNanoseconds()
        try reactor.poll(timeoutNanoseconds: 10_000_000_000) { _ in }
        XCTAssertLessThan(Reactor.nowNanoseconds() - start, 5_000_000_000)
    }

    /// 7. Many connections through one listener each get their own bytes back.
    static func manyConnections(_ variant: Variant, count: Int = 200) throws {
        let reactor = try Reactor(configuration: variant.configuration { configuration in
            configuration.slotsMax = 2 * count + 8
            configuration.sendBufferBytes = 16 * 1024
        })
        let (listener, port) = try reactor.listen(host: "127.0.0.1", port: 0)
        var messages: [Slot: [UInt8]] = [:]
        var echoes: [Slot: [UInt8]] = [:]
        for number in 0..<count {
            let client = try reactor.connect(host: "127.0.0.1", port: port)
            messages[client] = Array("client \(number) says \(String(repeating: "x", count: number % 37))".utf8)
            echoes[client] = []
        }
        var servers = Set<Slot>()
        var complete = 0
        try reactor.pump(seconds: 30, "\(count) echoes", until: { complete == count }) { event in
            switch event {
            case .connected(let slot):
                XCTAssertEqual(reactor.stage(slot, bytes: messages[slot]![...]), messages[slot]!.count)
            case .accepted(let from, let connection):
                XCTAssertEqual(from, listener)
                servers.insert(connection)
            case .received(let slot, let bytes):
                if servers.contains(slot) {
                    XCTAssertEqual(reactor.stage(slot, bytes: Array(bytes)[...]), bytes.count)
                } else {
                    echoes[slot]! += bytes
                    if echoes[slot]!.count == messages[slot]!.count { complete += 1 }
                }
            case .writable:
                break
            case .connectFailed, .closed, .timer:
                XCTFail("unexpected \(RecordedEvent(event))")
            }
        }
        XCTAssertEqual(servers.count, count)
        XCTAssertEqual(reactor.slotsInUse, 2 * count + 1)
        for (slot, message) in messages {
            XCTAssertEqual(echoes[slot], message, "\(slot)")
        }
    }

    /// connect to a port nobody listens on reports connectFailed(ECONNREFUSED) and frees the slot.
    static func connectRefused(_ variant: Variant) throws {
        let reactor = try Reactor(configuration: variant.configuration())
        let client = try reactor.connect(host: "127.0.0.1", port: try unusedLoopbackPort())
        var failure: Int32?
        try reactor.pump("the refusal", until: { failure != nil }) { event in
            guard case .connectFailed(let slot, let code) = event else {
                return XCTFail("unexpected \(RecordedEvent(event))")
            }
            XCTAssertEqual(slot, client)
            XCTAssertEqual(reactor.slotsInUse, 1, "the slot is freed only after the handler")
            failure = code
        }
        XCTAssertEqual(failure, ECONNREFUSED)
        try reactor.pump("the slot to be freed", until: { reactor.slotsInUse == 0 }) { event in
            XCTFail("unexpected \(RecordedEvent(event))")
        }
    }

    /// A reactor built on one thread and run by another (as worker threads do) works.
    static func builtHereRunElsewhere(_ variant: Variant) throws {
        final class Handoff: @unchecked Sendable {
            // Touched by one thread at a time: written here, read after join.
            var reactor: Reactor?
            var failure: String?
            var echoed = ""
        }
        let handoff = Handoff()
        handoff.reactor = try Reactor(configuration: variant.configuration())
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            defer { done.signal() }
            do {
                let reactor = handoff.reactor!
                let (_, port) = try reactor.listen(host: "127.0.0.1", port: 0)
                _ = try reactor.connect(host: "127.0.0.1", port: port)
                var server: Slot?
                var received: [UInt8] = []
                try reactor.pump("an echo on the worker thread", until: { received.count == 3 }) { event in
                    switch event {
                    case .connected(let slot): _ = reactor.stage(slot, bytes: Array("abc".utf8)[...])
                    case .accepted(_, let connection): server = connection
                    case .received(let slot, let bytes) where slot == server:
                        _ = reactor.stage(slot, bytes: Array(bytes)[...])
                    case .received(_, let bytes): received += bytes
                    default: break
                    }
                }
                handoff.echoed = String(decoding: received, as: UTF8.self)
            } catch {
                handoff.failure = "\(error)"
            }
        }
        thread.start()
        XCTAssertEqual(done.wait(timeout: .now() + 20), .success)
        XCTAssertNil(handoff.failure)
        XCTAssertEqual(handoff.echoed, "abc")
        handoff.reactor = nil
    }
}
