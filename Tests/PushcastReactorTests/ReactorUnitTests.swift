// Value-level tests of the reactor's pieces, and back-end selection (test 5).

import Glibc
import XCTest
@testable import PushcastReactor

final class ReactorBackendSelectionTests: XCTestCase {
    func testBlockedOrAbsentURingFallsBackToEpoll() {
        for code in [EPERM, ENOSYS] {
            guard case .useEpoll(let notice) = Reactor.fallbackAfterURingInitFailure(result: -code, requested: nil) else {
                return XCTFail("errno \(code) should fall back to epoll")
            }
            XCTAssertTrue(notice.hasPrefix("pushcast: io_uring unavailable ("), notice)
            XCTAssertTrue(notice.hasSuffix("); using epoll"), notice)
            XCTAssertTrue(notice.contains(String(cString: strerror(code))), notice)
        }
    }

    func testOtherURingInitErrorsFail() {
        for code in [EINVAL, ENOMEM, EMFILE] {
            guard case .fail(let description) = Reactor.fallbackAfterURingInitFailure(result: -code, requested: nil) else {
                return XCTFail("errno \(code) must not fall back")
            }
            XCTAssertTrue(description.hasPrefix("io_uring_queue_init: "), description)
        }
    }

    func testExplicitURingNeverFallsBack() {
        for code in [EPERM, ENOSYS] {
            guard case .fail = Reactor.fallbackAfterURingInitFailure(result: -code, requested: .uring) else {
                return XCTFail("an explicit .uring request must fail on errno \(code)")
            }
        }
    }

    func testSimulatedEPERMSelectsAWorkingEpollReactor() throws {
        var configuration = Variant.epoll.configuration()
        configuration.backend = nil
        configuration.simulatedURingInitError = -EPERM
        let reactor = try Reactor(configuration: configuration)
        XCTAssertEqual(reactor.backendKind, .epoll)
        XCTAssertFalse(reactor.multishotReceive)
        XCTAssertEqual(reactor.receiveMode, .readinessIntoReactorBuffer)
        // The fallback reactor really works.
        let (_, port) = try reactor.listen(host: "127.0.0.1", port: 0)
        let client = try reactor.connect(host: "127.0.0.1", port: port)
        var connected = false
        try reactor.pump("connect on the fallback reactor", until: { connected }) { event in
            if case .connected(let slot) = event { connected = slot == client }
        }
    }

    func testSimulatedEINVALIsAnError() {
        var configuration = Variant.uring.configuration()
        configuration.backend = nil
        configuration.simulatedURingInitError = -EINVAL
        XCTAssertThrowsError(try Reactor(configuration: configuration)) { error in
            XCTAssertTrue("\(error)".contains("io_uring_queue_init"), "\(error)")
        }
    }

    func testSimulatedEPERMWithExplicitURingIsAnError() {
        var configuration = Variant.uring.configuration()
        configuration.simulatedURingInitError = -EPERM
        XCTAssertThrowsError(try Reactor(configuration: configuration))
    }

    func testForcedEpollAndDefaultSelection() throws {
        let epoll = try Reactor(configuration: Variant.epoll.configuration())
        XCTAssertEqual(epoll.backendKind, .epoll)
        // Where io_uring works (it does on the development machines), the default picks it.
        if let uring = try? Reactor(configuration: Variant.uring.configuration()) {
            XCTAssertEqual(uring.backendKind, .uring)
            XCTAssertEqual(uring.multishotReceive, uring.receiveMode == .multishotProvidedBuffers)
            var configuration = Variant.uring.configuration()
            configuration.backend = nil
            XCTAssertEqual(try Reactor(configuration: configuration).backendKind, .uring)
            let single = try Reactor(configuration: Variant.uringSingleShot.configuration())
            XCTAssertFalse(single.multishotReceive)
            XCTAssertEqual(single.receiveMode, .singleShotProvidedBuffers)
        }
    }

    func testErrorsNameTheSyscall() {
        let reactor = try? Reactor(configuration: Variant.epoll.configuration())
        XCTAssertThrowsError(try reactor?.connect(host: "not-an-address", port: 1)) { error in
            XCTAssertTrue("\(error)".contains("connect"), "\(error)")
        }
        // Port 1 on loopback needs privileges we may have; binding the same port twice never works.
        if let reactor, let first = try? reactor.listen(host: "127.0.0.1", port: 0) {
            XCTAssertThrowsError(try reactor.listen(host: "127.0.0.1", port: first.port)) { error in
                XCTAssertTrue("\(error)".hasPrefix("bind("), "\(error)")
                XCTAssertTrue("\(error)".contains(String(cString: strerror(EADDRINUSE))), "\(error)")
            }
        }
    }
}

final class ReactorPartsTests: XCTestCase {
    func testUserDataPacksOperationIndexAndGeneration() {
        let packed = UserData(.send, index: 0xAB_CDEF, generation: 0xFFFF_FFFE)
        XCTAssertEqual(packed.operation, .send)
        XCTAssertEqual(packed.index, 0xAB_CDEF)
        XCTAssertEqual(packed.generation, 0xFFFF_FFFE)
        XCTAssertEqual(UserData(raw: packed.raw), packed)
        XCTAssertNil(UserData(raw: UInt64.max).operation, "liburing's internal timeout user_data is not ours")
    }

    func testTimerHeapOrdersByDeadlineThenScheduling() {
        var heap = TimerHeap(capacity: 4)
        let deadlines: [UInt64] = [50, 10, 40, 10, 30, 20, 60, 5]
        for (id, deadline) in deadlines.enumerated() {
            heap.insert(id: UInt64(id), deadlineNanoseconds: deadline)
        }
        XCTAssertEqual(heap.earliestDeadline, 5)
        XCTAssertNil(heap.popDue(nowNanoseconds: 4), "nothing is due before 5")
        var order: [UInt64] = []
        while let entry = heap.popDue(nowNanoseconds: 45) { order.append(entry.id) }
        XCTAssertEqual(order, [7, 1, 3, 5, 4, 2])
        XCTAssertEqual(heap.count, 2)
        XCTAssertEqual(heap.earliestDeadline, 50)
    }

    func testStagingRingWrapsAndNeverTouchesUnsentBytes() throws {
        let table = try SlotTable(capacity: 2, sendBufferBytes: 100)
        let index = try XCTUnwrap(table.allocate(fd: -1, state: .connected))
        XCTAssertEqual(table.stageCapacity(index), 100)
        XCTAssertEqual(table.stage(index) { buffer in buffer.initializeMemory(as: UInt8.self, repeating: 1); return 70 }, 70)
        XCTAssertEqual(table.stageCapacity(index), 30)
        XCTAssertEqual(table.nextSendRegion(index).count, 70)
        table.completeSend(index, bytes: 60)
        // 10 bytes at 60..<70 remain; the tail 70..<100 is offered first.
        XCTAssertEqual(table.stageCapacity(index), 30)
        XCTAssertEqual(table.stage(index) { buffer in buffer.initializeMemory(as: UInt8.self, repeating: 2); return 30 }, 30)
        // Then the ring wraps: 0..<60 is free.
        XCTAssertEqual(table.stageCapacity(index), 60)
        XCTAssertEqual(table.stage(index) { buffer in buffer.initializeMemory(as: UInt8.self, repeating: 3); return 60 }, 60)
        XCTAssertEqual(table.stageCapacity(index), 0)
        XCTAssertEqual(table.stage(index) { _ in XCTFail("a full buffer offers nothing"); return 0 }, 0)
        // Sends go out in order: the 10 leftover 1s, then the 30 2s up to the end, then the 3s.
        let first = table.nextSendRegion(index)
        XCTAssertEqual(Array(first), Array(repeating: 1, count: 10) + Array(repeating: 2, count: 30))
        table.completeSend(index, bytes: first.count)
        let second = table.nextSendRegion(index)
        XCTAssertEqual(Array(second), Array(repeating: 3, count: 60))
        table.completeSend(index, bytes: 60)
        XCTAssertEqual(table.stageCapacity(index), 100, "an empty ring starts over at its beginning")
    }

    func testSlotsAreReusedWithANewGeneration() throws {
        let table = try SlotTable(capacity: 2, sendBufferBytes: 16)
        let index = try XCTUnwrap(table.allocate(fd: -1, state: .connected))
        let first = table.slot(index)
        XCTAssertTrue(table.isCurrent(first))
        table.retire(index)
        XCTAssertFalse(table.isCurrent(first))
        table.free(index)
        let again = try XCTUnwrap(table.allocate(fd: -1, state: .connected))
        XCTAssertEqual(again, index)
        XCTAssertNotEqual(table.slot(again).generation, first.generation)
        XCTAssertFalse(table.isCurrent(first))
        XCTAssertNotNil(table.allocate(fd: -1, state: .connected))
        XCTAssertNil(table.allocate(fd: -1, state: .connected), "the slab is fixed")
        XCTAssertEqual(table.inUse, 2)
    }
}
