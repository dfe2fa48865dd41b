"""SQLAlchemy 2 ORM on psycopg 3 against a PostgreSQL-compatible server.

What an application built on the ORM does first and most: create_all (the
dialect's catalog probes, then CREATE TABLE with foreign keys), unit-of-work
flushes (batched INSERT ... RETURNING, UPDATE, DELETE with cascades), queries
with joins, relationship loading (lazy, joined, selectin), aggregates, paging,
begin_nested (savepoints), and drop_all.

Connection parameters come from PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE.
Prints one normalized line per result or error; run against PostgreSQL and
against pgtier it must print the same transcript (drivers.rs compares them).
"""

import datetime
import os
from decimal import Decimal

import psycopg
from sqlalchemy import (
    ForeignKey, Numeric, String, Text, create_engine, func, select, update, delete, text,
)
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.orm import (
    DeclarativeBase, Mapped, Session, joinedload, mapped_column, relationship, selectinload,
)


def out(line):
    print(line, flush=True)


class Base(DeclarativeBase):
    pass


class Customer(Base):
    __tablename__ = "orm_customer"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(40), unique=True)
    email: Mapped[str | None] = mapped_column(String(80))
    joined: Mapped[datetime.date]
    orders: Mapped[list["Order"]] = relationship(
        back_populates="customer", cascade="all, delete-orphan", order_by="Order.id")

    def __repr__(self):
        return f"Customer({self.id}, {self.name!r}, {self.email!r}, {self.joined.isoformat()})"


class Order(Base):
    __tablename__ = "orm_order"
    id: Mapped[int] = mapped_column(primary_key=True)
    customer_id: Mapped[int] = mapped_column(ForeignKey("orm_customer.id"))
    placed: Mapped[datetime.datetime]
    note: Mapped[str | None] = mapped_column(Text)
    customer: Mapped[Customer] = relationship(back_populates="orders")
    lines: Mapped[list["OrderLine"]] = relationship(
        back_populates="order", cascade="all, delete-orphan", order_by="OrderLine.id")

    def __repr__(self):
        return f"Order({self.id}, c={self.customer_id}, {self.placed.isoformat()}, {self.note!r})"


class OrderLine(Base):
    __tablename__ = "orm_order_line"
    id: Mapped[int] = mapped_column(primary_key=True)
    order_id: Mapped[int] = mapped_column(ForeignKey("orm_order.id"))
    sku: Mapped[str] = mapped_column(String(16))
    qty: Mapped[int]
    price: Mapped[Decimal] = mapped_column(Numeric(10, 2))
    order: Mapped[Order] = relationship(back_populates="lines")

    def __repr__(self):
        return f"Line({self.id}, o={self.order_id}, {self.sku}, {self.qty}, {self.price})"


def sqlstate(error):
    orig = getattr(error, "orig", None)
    return getattr(orig, "sqlstate", None) or getattr(getattr(orig, "diag", None), "sqlstate", None)


def main():
    env = os.environ
    url = (f"postgresql+psycopg://{env['PGUSER']}:{env['PGPASSWORD']}@{env['PGHOST']}:{env['PGPORT']}"
           f"/{env['PGDATABASE']}")
    engine = create_engine(url)

    with engine.begin() as conn:
        for table in ("orm_order_line", "orm_order", "orm_customer"):
            conn.execute(text(f"DROP TABLE IF EXISTS {table}"))
    Base.metadata.create_all(engine)
    out("create_all: ok")
    # create_all again finds every table and creates nothing.
    Base.metadata.create_all(engine)
    out("create_all again: ok")

    day = datetime.date(2024, 2, 29)
    at = datetime.datetime(2024, 2, 29, 13, 45, 56, 123456)
    with Session(engine) as session:
        customers = [
            Customer(name=f"c{i}", email=None if i % 3 == 0 else f"c{i}@example.com",
                     joined=day + datetime.timedelta(days=i))
            for i in range(1, 7)
        ]
        for i, customer in enumerate(customers):
            for j in range(i % 3):
                order = Order(placed=at + datetime.timedelta(hours=i * 10 + j), note=f"n{i}.{j}" if j else None)
                for k in range(j + 1):
                    order.lines.append(OrderLine(sku=f"S{i}{j}{k}", qty=k + 1, price=Decimal(f"{i}.{j}{k}") * 3))
                customer.orders.append(order)
        session.add_all(customers)
        session.commit()
        out(f"ids: {[c.id for c in customers]}")
        out(f"order ids: {sorted(o.id for c in customers for o in c.orders)}")

    with Session(engine) as session:
        # Lazy loading: one SELECT per relationship touched.
        c2 = session.get(Customer, 2)
        out(f"get: {c2!r} orders={c2.orders!r}")
        out(f"lazy lines: {c2.orders[0].lines!r}")
        # Joined and selectin eager loading.
        rows = session.scalars(
            select(Customer).options(joinedload(Customer.orders).joinedload(Order.lines)).order_by(Customer.id)
        ).unique().all()
        out("joinedload: " + "; ".join(f"{c.name}:{[len(o.lines) for o in c.orders]}" for c in rows))
        rows = session.scalars(
            select(Customer).options(selectinload(Customer.orders).selectinload(Order.lines)).order_by(Customer.id.desc())
        ).all()
        out("selectinload: " + "; ".join(f"{c.name}:{[o.id for o in c.orders]}" for c in rows))
        # Explicit joins, aggregates, filters, paging.
        totals = session.execute(
            select(Customer.name, func.count(OrderLine.id), func.sum(OrderLine.qty * OrderLine.price))
            .join(Customer.orders).join(Order.lines)
            .group_by(Customer.name).order_by(func.sum(OrderLine.qty * OrderLine.price).desc(), Customer.name)
        ).all()
        out(f"totals: {[tuple(r) for r in totals]}")
        outer = session.execute(
            select(Customer.name, func.count(Order.id)).outerjoin(Customer.orders)
            .group_by(Customer.id, Customer.name).order_by(Customer.id)
        ).all()
        out(f"outer join counts: {[tuple(r) for r in outer]}")
        page = session.scalars(select(Customer).where(Customer.email.is_not(None)).order_by(Customer.name).limit(2).offset(1)).all()
        out(f"page: {page!r}")
        like = session.scalars(select(Customer.name).where(Customer.email.like("%5@%"))).all()
        out(f"like: {like}")
        inlist = session.scalars(select(Customer.name).where(Customer.id.in_([1, 3, 5, 99])).order_by(Customer.id)).all()
        out(f"in list: {inlist}")
        sub = select(Order.customer_id).where(Order.note.is_not(None))
        with_notes = session.scalars(select(Customer.name).where(Customer.id.in_(sub)).order_by(Customer.name)).all()
        out(f"in subquery: {with_notes}")
        exists = session.scalars(select(Customer.name).where(~Customer.orders.any()).order_by(Customer.name)).all()
        out(f"without orders: {exists}")
        between = session.scalars(
            select(Order.id).where(Order.placed.between(at, at + datetime.timedelta(hours=30))).order_by(Order.id)
        ).all()
        out(f"between: {between}")

    with Session(engine) as session:
        # Unit-of-work UPDATE, bulk UPDATE/DELETE, cascade delete.
        c3 = session.get(Customer, 3)
        c3.email = "three@example.com"
        c3.orders[0].note = "changed"
        session.commit()
        out(f"updated: {session.get(Customer, 3)!r} {session.get(Customer, 3).orders[0]!r}")
        result = session.execute(update(OrderLine).where(OrderLine.qty > 1).values(price=OrderLine.price + 1))
        out(f"bulk update rowcount: {result.rowcount}")
        session.delete(session.get(Customer, 5))
        session.commit()
        out(f"after cascade delete: customers={session.scalar(select(func.count(Customer.id)))} "
            f"orders={session.scalar(select(func.count(Order.id)))} lines={session.scalar(select(func.count(OrderLine.id)))}")
        result = session.execute(delete(OrderLine).where(OrderLine.sku.startswith("S21")))
        session.commit()
        out(f"bulk delete rowcount: {result.rowcount}")

    with Session(engine) as session:
        # begin_nested: a savepoint that fails and rolls back alone.
        session.add(Customer(name="outer", joined=day))
        try:
            with session.begin_nested():
                session.add(Customer(name="c1", joined=day))  # duplicate name
        except IntegrityError as error:
            out(f"nested duplicate: {sqlstate(error)}")
        with session.begin_nested():
            session.add(Customer(name="inner", joined=day))
        session.commit()
        names = session.scalars(select(Customer.name).order_by(Customer.name)).all()
        out(f"after nested: {names}")
        # A foreign key violation at flush; the session rolls back.
        try:
            session.add(Order(customer_id=999, placed=at))
            session.commit()
        except IntegrityError as error:
            out(f"fk violation: {sqlstate(error)}")
            session.rollback()
        try:
            session.execute(text("SELECT 1/0"))
        except DBAPIError as error:
            out(f"division: {sqlstate(error)}")
            session.rollback()
        final = session.execute(
            select(Customer.name, Order.id, OrderLine.sku, OrderLine.qty, OrderLine.price)
            .join(Order, Order.customer_id == Customer.id).join(OrderLine, OrderLine.order_id == Order.id)
            .order_by(OrderLine.id)
        ).all()
        out(f"final lines: {[tuple(str(v) for v in r) for r in final]}")

    Base.metadata.drop_all(engine)
    out("drop_all: ok")
    engine.dispose()
    out("done")


if __name__ == "__main__":
    main()
